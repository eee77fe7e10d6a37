//! A held lock as Python sees it: its fences, its deadline, whether it was
//! lost, and its renewal and release, each blocking or in the background.

use std::sync::Arc;
use std::time::Instant;

use lockward::recipe::{Held, Revocation};
use lockward::LostSignal;
use pyo3::prelude::*;
use tokio::sync::Mutex;

use crate::durations::optional_seconds;
use crate::task::{block_on, now_or_later, settle, Pending};

/// A held lock (or several taken together, a reader's share, permits).
#[pyclass(frozen, module = "lockward._native")]
pub(crate) struct Lease {
    name: String,
    fences: Vec<u64>,
    /// The process it was taken in: a forked child never uses it.
    pid: u32,
    /// `None` once released.
    held: Arc<Mutex<Option<Held>>>,
    lost: LostSignal,
    /// A leadership's revocation (a leader stops at its renew deadline).
    revocation: Option<Revocation>,
}

impl Lease {
    pub(crate) fn new(held: Held) -> Lease {
        let revocation = match &held {
            Held::Leader(leadership) => Some(leadership.revocation()),
            _ => None,
        };
        Lease {
            name: held.name(),
            fences: held.fences(),
            pid: std::process::id(),
            lost: held.lost_signal(),
            revocation,
            held: Arc::new(Mutex::new(Some(held))),
        }
    }

    /// Refuses a lease used in a child made by `os.fork()`.
    fn in_its_process(&self) -> PyResult<()> {
        if self.pid == std::process::id() {
            return Ok(());
        }
        Err(crate::errors::invalid(format!(
            "lock {:?} was taken by process {}, not this one (a child made by fork): \
             take it again here",
            self.name, self.pid
        )))
    }
}

/// Extends what `held` holds, or fails with NotOwner when released.
async fn extend(
    held: Arc<Mutex<Option<Held>>>,
    name: String,
    ttl: Option<std::time::Duration>,
) -> lockward::Result<()> {
    match held.lock().await.as_ref() {
        Some(held) => held.extend(ttl).await,
        None => Err(lockward::Error::NotOwner { name }),
    }
}

/// Stores `result` as a claimed key's result, then releases the key.
async fn complete(
    held: Arc<Mutex<Option<Held>>>,
    name: String,
    result: String,
) -> lockward::Result<()> {
    let taken = held.lock().await.take();
    match taken {
        Some(Held::Claim(claim)) => claim.complete(&result).await,
        Some(other) => {
            let _ = other.release().await;
            Err(lockward::Error::InvalidArgument {
                what: "complete",
                why: format!("{name} is not an idempotency key's claim"),
            })
        }
        None => Err(lockward::Error::NotOwner { name }),
    }
}

/// Releases what `held` holds; a second release does nothing.
async fn release(held: Arc<Mutex<Option<Held>>>) -> lockward::Result<()> {
    let taken = held.lock().await.take();
    match taken {
        Some(held) => held.release().await,
        None => Ok(()),
    }
}

#[pymethods]
impl Lease {
    /// The lock's name (the first, for several).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The fences of every name, in the order given.
    #[getter]
    fn fences(&self) -> Vec<u64> {
        self.fences.clone()
    }

    /// Seconds left until the lease ends unless renewed (0 when past).
    fn remaining(&self) -> f64 {
        self.lost
            .deadline()
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
    }

    /// Why the lease was lost (`"expired"`, …), or `None` while held.
    fn lost_reason(&self) -> Option<String> {
        let mut signal = self.lost.clone();
        if !signal.is_lost() {
            return None;
        }
        let reason = futures_now(signal.wait());
        Some(reason.map_or_else(|| "lost".to_string(), |r| r.to_string()))
    }

    /// Waits until the lease is lost or `timeout` seconds pass (`None`:
    /// without a limit); returns whether it was lost. Ctrl-C interrupts it.
    #[pyo3(signature = (timeout=None))]
    fn wait_lost(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let timeout = optional_seconds("timeout", timeout)?;
        let mut signal = self.lost.clone();
        block_on(py, async move {
            match timeout {
                None => {
                    signal.wait().await;
                    Ok(true)
                }
                Some(t) => Ok(tokio::time::timeout(t, signal.wait()).await.is_ok()),
            }
        })
    }

    /// `done(reason, None)` when the lease is lost.
    fn wait_lost_async(&self, py: Python<'_>, done: Py<PyAny>) -> PyResult<Pending> {
        let mut signal = self.lost.clone();
        settle(
            py,
            async move { Ok(signal.wait().await.to_string()) },
            done,
            |py, reason| Ok(reason.into_pyobject(py)?.into_any().unbind()),
        )
    }

    /// Renews the lease for `ttl` seconds (`None`: its TTL); given
    /// `done`, in the background.
    #[pyo3(signature = (ttl=None, done=None))]
    fn extend(
        &self,
        py: Python<'_>,
        ttl: Option<f64>,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.in_its_process()?;
        let ttl = optional_seconds("ttl", ttl)?;
        let work = extend(self.held.clone(), self.name.clone(), ttl);
        now_or_later(py, work, done, |py, ()| Ok(py.None()))
    }

    /// Releases the lease; a second release does nothing. Given `done`,
    /// in the background.
    #[pyo3(signature = (done=None))]
    fn release(&self, py: Python<'_>, done: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        self.in_its_process()?;
        now_or_later(py, release(self.held.clone()), done, |py, ()| Ok(py.None()))
    }

    /// A leadership: whether it ended without a resign (its renewals failed
    /// for the renew deadline, or the store said it is gone).
    fn is_revoked(&self) -> bool {
        self.revocation.as_ref().is_some_and(Revocation::is_revoked)
    }

    /// A leadership: waits until it is revoked or `timeout` seconds pass;
    /// returns whether it was. Ctrl-C interrupts it. Given `done`, waits in
    /// the background.
    #[pyo3(signature = (timeout=None, done=None))]
    fn wait_revoked(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let timeout = optional_seconds("timeout", timeout)?;
        let Some(mut revocation) = self.revocation.clone() else {
            return Err(crate::errors::invalid(format!(
                "{:?} is not a leadership",
                self.name
            )));
        };
        let revoked = async move {
            match timeout {
                None => {
                    revocation.wait().await;
                    Ok(true)
                }
                Some(t) => Ok(tokio::time::timeout(t, revocation.wait()).await.is_ok()),
            }
        };
        now_or_later(py, revoked, done, |py, revoked| {
            Ok(revoked.into_pyobject(py)?.to_owned().into_any().unbind())
        })
    }

    /// An idempotency key's claim: stores `result`, then releases the key
    /// (given `done`, in the background).
    #[pyo3(signature = (result, done=None))]
    fn complete(
        &self,
        py: Python<'_>,
        result: String,
        done: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.in_its_process()?;
        let completed = complete(self.held.clone(), self.name.clone(), result);
        now_or_later(py, completed, done, |py, ()| Ok(py.None()))
    }

    /// Whether the lease was released.
    fn is_released(&self) -> bool {
        self.held.try_lock().is_ok_and(|held| held.is_none())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Ok(mut held) = self.held.try_lock() else {
            // A release or renewal runs now, and owns what it needs.
            return;
        };
        let Some(held) = held.take() else { return };
        if self.pid != std::process::id() {
            // The parent's lock: a child leaves it alone (dropping it would
            // release the parent's lock through the parent's connections).
            std::mem::forget(held);
            return;
        }
        // Dropped in the runtime's context, a guard releases itself in the
        // background (the Python side warned first).
        if let Ok(runtime) = crate::runtime::runtime() {
            let _context = runtime.enter();
            drop(held);
        }
    }
}

/// The value of a future that is ready now (a lost signal already fired).
fn futures_now<F: std::future::Future>(future: F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(waker);
    let mut future = std::pin::pin!(future);
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => Some(value),
        std::task::Poll::Pending => None,
    }
}
