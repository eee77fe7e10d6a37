//! A store, opened in the process that uses it: a child made by
//! `os.fork()` opens it again (its own connections) at its first call.

use std::sync::Mutex;

use lockward::{LockOptions, Renewal};
use pyo3::prelude::*;

use crate::durations::{optional_seconds, seconds};
use crate::lease::{Held, Lease};
use crate::task::{block_on, settle, Pending};

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
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((owner, store)) = opened.as_ref() {
            if *owner == pid {
                return Ok(store.clone());
            }
        }
        if let Some((_, inherited)) = opened.take() {
            // The parent's connections: never used, closed or dropped here.
            std::mem::forget(inherited);
        }
        let url = self.url.clone();
        let store = block_on(py, async move { lockward::Store::open(&url).await })?;
        *opened = Some((pid, store.clone()));
        Ok(store)
    }
}

/// What a lock call asks for, checked.
struct Ask {
    names: Vec<String>,
    opts: LockOptions,
    try_only: bool,
}

impl Ask {
    fn new(
        names: Vec<String>,
        ttl: f64,
        wait: Option<f64>,
        label: Option<String>,
        renew: bool,
    ) -> PyResult<Ask> {
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
            names,
            opts,
            try_only,
        })
    }

    /// Takes the lock (or, with several names, all of them).
    async fn take(self, store: lockward::Store) -> lockward::Result<Held> {
        let Ask {
            names,
            opts,
            try_only,
        } = self;
        match names.as_slice() {
            [name] if try_only => store.try_acquire(name, &opts).await.map(Held::One),
            [name] => store.acquire(name, &opts).await.map(Held::One),
            _ if try_only => store.try_acquire_all(&names, &opts).await.map(Held::All),
            _ => store.acquire_all(&names, &opts).await.map(Held::All),
        }
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

    /// Takes the lock `names[0]` (or every one of `names`, all or none),
    /// waiting up to `wait` seconds (`None`: without a limit; `0`: only
    /// if free), the GIL released; Ctrl-C ends the wait and leaves nothing
    /// held.
    #[pyo3(signature = (names, ttl, wait, label, renew))]
    fn lock(
        &self,
        py: Python<'_>,
        names: Vec<String>,
        ttl: f64,
        wait: Option<f64>,
        label: Option<String>,
        renew: bool,
    ) -> PyResult<Lease> {
        let ask = Ask::new(names, ttl, wait, label, renew)?;
        let store = self.here(py)?;
        let held = block_on(py, ask.take(store))?;
        Ok(Lease::new(held))
    }

    /// As `lock`, in the background: `done(lease, None)` or
    /// `done(None, exception)` is called from another thread.
    #[pyo3(signature = (names, ttl, wait, label, renew, done))]
    #[allow(clippy::too_many_arguments)]
    fn lock_async(
        &self,
        py: Python<'_>,
        names: Vec<String>,
        ttl: f64,
        wait: Option<f64>,
        label: Option<String>,
        renew: bool,
        done: Py<PyAny>,
    ) -> PyResult<Pending> {
        let ask = Ask::new(names, ttl, wait, label, renew)?;
        let store = self.here(py)?;
        settle(ask.take(store), done, |py, held| {
            Ok(Py::new(py, Lease::new(held))?.into_any())
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("Store({:?})", self.address(py)?))
    }
}
