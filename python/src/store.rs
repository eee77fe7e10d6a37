//! A store, opened in the process that uses it: a child made by
//! `os.fork()` opens it again (its own connections) at its first call.

use std::sync::Mutex;

use lockward::{LockOptions, Renewal};
use pyo3::prelude::*;

use lockward::recipe::{Begun, Candidate, ElectionConfig, Held, Idempotency, Wanted};

use crate::durations::{optional_seconds, seconds};
use crate::errors::invalid;
use crate::lease::Lease;
use crate::limits::{self, Verdict};
use crate::rows::{row_of, Row};
use crate::task::{block_on, now_or_later};

/// A lockward store, shared by every thread of the process.
#[pyclass(frozen, module = "lockward._native")]
pub(crate) struct Store {
    url: String,
    /// The store as opened, and the process that opened it.
    opened: Mutex<Option<(u32, lockward::Store)>>,
}

impl Store {
    /// The store opened in this process (opened again after a fork).
    fn here(&self, py: Python<'_>) -> PyResult<lockward::Store> {
        let pid = std::process::id();
        {
            let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
            match opened.as_ref() {
                Some((owner, store)) if *owner == pid => return Ok(store.clone()),
                Some(_) => {
                    // The parent's connections: never used, closed or
                    // dropped here.
                    std::mem::forget(opened.take());
                }
                None => {}
            }
        }
        // Opened without holding the lock: the open releases the GIL, and
        // another thread waiting for the lock with the GIL held would
        // deadlock with it. Two threads may both open; one store is kept.
        let url = self.url.clone();
        let store = block_on(py, async move { lockward::Store::open(&url).await })?;
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        match opened.as_ref() {
            Some((owner, kept)) if *owner == pid => Ok(kept.clone()),
            _ => {
                *opened = Some((pid, store.clone()));
                Ok(store)
            }
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let opened = self.opened.get_mut().unwrap_or_else(|p| p.into_inner());
        if opened
            .as_ref()
            .is_some_and(|(owner, _)| *owner != std::process::id())
        {
            // A store the parent opened, collected in a child made by
            // fork: dropping it would reach into the parent's runtime
            // (whose threads do not exist here and whose locks may have
            // been held at the fork) and hang the child.
            std::mem::forget(opened.take());
        }
    }
}

/// How long a run-once job's record is kept on stores that cannot keep it
/// forever, as `lockward once` keeps it.
const LONGEST: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 24 * 3600);

/// What an acquisition asks for, checked.
struct Ask {
    kind: Kind,
    names: Vec<String>,
    permits: u32,
    take: u32,
    opts: LockOptions,
    try_only: bool,
}

/// The kinds of hold Python asks for by name.
#[derive(Clone, Copy)]
enum Kind {
    Lock,
    Read,
    Write,
    Permits,
}

impl Ask {
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: &str,
        names: Vec<String>,
        permits: u32,
        take: u32,
        ttl: f64,
        wait: Option<f64>,
        label: Option<String>,
        renew: bool,
    ) -> PyResult<Ask> {
        let kind = match kind {
            "lock" => Kind::Lock,
            "read" => Kind::Read,
            "write" => Kind::Write,
            "permits" => Kind::Permits,
            other => return Err(invalid(format!("kind: {other:?} is not a kind of hold"))),
        };
        if names.is_empty() || (names.len() > 1 && !matches!(kind, Kind::Lock)) {
            return Err(invalid(
                "names: give one name (several only for locks taken together)".into(),
            ));
        }
        let mut opts = LockOptions::new().ttl(seconds("ttl", ttl)?);
        if !renew {
            opts = opts.renewal(Renewal::Off);
        }
        if let Some(label) = label {
            opts = opts.label(label);
        }
        let try_only = wait == Some(0.0);
        opts = match optional_seconds("wait", wait)? {
            None => opts.wait_forever(),
            Some(wait) if wait.is_zero() => opts,
            Some(wait) => opts.wait(wait),
        };
        Ok(Ask {
            kind,
            names,
            permits,
            take,
            opts,
            try_only,
        })
    }

    /// Takes what was asked for.
    async fn take(self, store: lockward::Store) -> lockward::Result<Held> {
        let wanted = match self.kind {
            Kind::Lock => Wanted::Locks(&self.names),
            Kind::Read => Wanted::Read(&self.names[0]),
            Kind::Write => Wanted::Write(&self.names[0]),
            Kind::Permits => Wanted::Permits {
                semaphore: &self.names[0],
                permits: self.permits,
                take: self.take,
            },
        };
        Held::take(&store, wanted, &self.opts, self.try_only).await
    }
}

#[pymethods]
impl Store {
    /// Opens the store at `url` (`sqlite:///var/lib/app/locks.db`,
    /// `redis://…`, `etcd://…`, `zk://…`, `postgres://…`, `mysql://…`,
    /// `k8s://…`, `memory://`).
    #[new]
    fn new(py: Python<'_>, url: String) -> PyResult<Store> {
        let store = Store {
            url,
            opened: Mutex::new(None),
        };
        store.here(py)?;
        Ok(store)
    }

    /// The store's address, without its password.
    #[getter]
    fn address(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.here(py)?.address())
    }

    /// Takes a hold of `kind` ("lock": `names[0]`, or every one of
    /// `names`, all or none; "read", "write": a read-write lock's sides;
    /// "permits": `take` of a semaphore's `permits`), waiting up to `wait`
    /// seconds (`None`: without a limit; `0`: only if free), the GIL
    /// released; Ctrl-C ends the wait and leaves nothing held. Given
    /// `done`, it takes it in the background and returns at once
    /// (`done(lease, None)` or `done(None, exception)` follows from
    /// another thread).
    #[pyo3(signature = (kind, names, permits, take, ttl, wait, label, renew, done=None))]
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &self,
        py: Python<'_>,
        kind: &str,
        names: Vec<String>,
        permits: u32,
        take: u32,
        ttl: f64,
        wait: Option<f64>,
        label: Option<String>,
        renew: bool,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let ask = Ask::new(kind, names, permits, take, ttl, wait, label, renew)?;
        let store = self.here(py)?;
        now_or_later(py, ask.take(store), done, |py, held| {
            Ok(Py::new(py, Lease::new(held))?.into_any())
        })
    }

    /// The holder of `name`, if any.
    fn inspect(&self, py: Python<'_>, name: String) -> PyResult<Option<Row>> {
        let store = self.here(py)?;
        let info = block_on(py, async move { store.inspect(&name).await })?;
        Ok(info.map(row_of))
    }

    /// Every held lock (and reader's share or permit holder) whose name
    /// starts with `prefix`.
    fn list(&self, py: Python<'_>, prefix: String) -> PyResult<Vec<Row>> {
        let store = self.here(py)?;
        let rows = block_on(py, async move { store.list(&prefix).await })?;
        Ok(rows.into_iter().map(row_of).collect())
    }

    /// Counts one request of `subject` against the rate limit `name` and
    /// returns the verdict; or, given `done`, counts it in the background
    /// and returns at once (`done(verdict, None)` or `done(None,
    /// exception)` follows from another thread).
    #[pyo3(signature = (name, subject, limit, period, burst, done=None))]
    #[allow(clippy::too_many_arguments)]
    fn check_rate(
        &self,
        py: Python<'_>,
        name: String,
        subject: String,
        limit: u64,
        period: f64,
        burst: Option<u64>,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let period = seconds("period", period)?;
        let store = self.here(py)?;
        let check = limits::check(store, name, subject, limit, period, burst);
        now_or_later(py, check, done, |py, verdict: Verdict| {
            Ok(verdict.into_pyobject(py)?.into_any().unbind())
        })
    }

    /// Campaigns in `election` as `identity` until elected (or `wait`
    /// seconds pass; 0: only if nobody leads), with client-go's timing.
    /// The leadership renews itself every `retry` seconds.
    #[pyo3(signature = (election, identity, lease, renew_deadline, retry, wait, done=None))]
    #[allow(clippy::too_many_arguments)]
    fn campaign(
        &self,
        py: Python<'_>,
        election: String,
        identity: String,
        lease: f64,
        renew_deadline: f64,
        retry: f64,
        wait: Option<f64>,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let config = ElectionConfig {
            lease_duration: seconds("lease_duration", lease)?,
            renew_deadline: seconds("renew_deadline", renew_deadline)?,
            retry_period: seconds("retry_period", retry)?,
        };
        let wait = optional_seconds("wait", wait)?;
        let candidate = Candidate::new(self.here(py)?, election.as_str(), identity, config)
            .map_err(|e| crate::errors::to_py(&e))?;
        let elected = async move {
            match wait {
                Some(w) if w.is_zero() => candidate.try_campaign().await,
                Some(w) => tokio::time::timeout(w, candidate.campaign())
                    .await
                    .unwrap_or(Err(lockward::Error::TimedOut {
                        name: election,
                        waited: w,
                    })),
                None => candidate.campaign().await,
            }
        };
        now_or_later(py, elected, done, |py, leadership| {
            Ok(Py::new(py, Lease::new(Held::Leader(leadership)))?.into_any())
        })
    }

    /// The identity of `election`'s leader, if anyone leads.
    #[pyo3(signature = (election, done=None))]
    fn leader(
        &self,
        py: Python<'_>,
        election: String,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let observer = Candidate::new(
            self.here(py)?,
            election,
            "observer",
            ElectionConfig::default(),
        )
        .map_err(|e| crate::errors::to_py(&e))?;
        now_or_later(
            py,
            async move { observer.leader().await },
            done,
            |py, leader| Ok(leader.into_pyobject(py)?.into_any().unbind()),
        )
    }

    /// Waits until `election`'s leader is no longer `last` and returns the
    /// new one (`None`: nobody leads), looking again every `retry` seconds
    /// (a release wakes it at once where the store pushes releases); or,
    /// given `done`, in the background.
    #[pyo3(signature = (election, last, retry, done=None))]
    fn next_leader_change(
        &self,
        py: Python<'_>,
        election: String,
        last: Option<String>,
        retry: f64,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let config = ElectionConfig {
            retry_period: seconds("retry_period", retry)?,
            ..ElectionConfig::default()
        };
        let observer = Candidate::new(self.here(py)?, election, "observer", config)
            .map_err(|e| crate::errors::to_py(&e))?;
        now_or_later(
            py,
            async move { observer.next_leader_change(last.as_deref()).await },
            done,
            |py, leader| Ok(leader.into_pyobject(py)?.into_any().unbind()),
        )
    }

    /// Looks for the result of idempotency key `key` in `namespace`, and
    /// claims the key when there is none: ("stored", result),
    /// ("in_progress", None) or ("claimed", lease). `keep`: seconds, or
    /// `None` for forever (stores that can), or -1 for forever where the
    /// store can and ten years elsewhere.
    #[pyo3(signature = (key, namespace, keep, wait, ttl, label, done=None))]
    #[allow(clippy::too_many_arguments)]
    fn claim(
        &self,
        py: Python<'_>,
        key: String,
        namespace: String,
        keep: Option<f64>,
        wait: bool,
        ttl: f64,
        label: Option<String>,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let store = self.here(py)?;
        let mut keys = Idempotency::new(store.clone()).namespace(namespace);
        keys = match keep {
            None => keys.permanent(),
            Some(k) if k < 0.0 && store.capabilities().permanent_records => keys.permanent(),
            Some(k) if k < 0.0 => keys.retention(LONGEST),
            Some(k) => keys.retention(seconds("keep", k)?),
        };
        let mut opts = LockOptions::new().ttl(seconds("ttl", ttl)?).wait_forever();
        if let Some(label) = label {
            opts = opts.label(label);
        }
        let keys = keys.lock_options(opts).waiting(wait);
        let begun = async move { keys.begin(&key).await };
        now_or_later(py, begun, done, |py, begun| {
            let found = match begun {
                Begun::Stored(result) => ("stored", result.into_pyobject(py)?.into_any().unbind()),
                Begun::InProgress => ("in_progress", py.None()),
                Begun::Claimed(claim) => (
                    "claimed",
                    Py::new(py, Lease::new(Held::Claim(claim)))?.into_any(),
                ),
            };
            Ok(found.into_pyobject(py)?.into_any().unbind())
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("Store({:?})", self.address(py)?))
    }
}
