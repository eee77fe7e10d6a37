//! Running lockward's futures for Python: blocking, with the GIL released
//! and Ctrl-C heard within 50 ms; or in the background, handing the outcome
//! to a callback (what `lockward.aio` settles its asyncio futures with).

use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::task::AbortHandle;

use crate::errors::to_py;
use crate::runtime::runtime;

/// How often a blocking wait checks for signals (Ctrl-C).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// Runs `work` to its end on the calling thread, the GIL released so other
/// threads run. A signal handler that raises (KeyboardInterrupt) cancels
/// `work` (dropping it, which lockward's cancellation contract makes leave
/// nothing held) and the exception propagates.
pub(crate) fn block_on<T: Send + 'static>(
    py: Python<'_>,
    work: impl Future<Output = lockward::Result<T>> + Send + 'static,
) -> PyResult<T> {
    let runtime = runtime()?;
    // Polled here, not spawned: no hand-over between threads per call.
    // Boxed, so that dropping it below drops the future itself.
    let mut work = Box::pin(work);
    loop {
        let polled = py.detach(|| {
            runtime.block_on(async { tokio::time::timeout(SIGNAL_CHECK, work.as_mut()).await })
        });
        match polled {
            Ok(outcome) => return outcome.map_err(|e| to_py(&e)),
            Err(_) => {
                if let Err(interrupted) = py.check_signals() {
                    // Dropped in the runtime's context: its clean-up (a
                    // place in line, a grant in flight) may spawn tasks.
                    let _context = runtime.enter();
                    drop(work);
                    return Err(interrupted);
                }
            }
        }
    }
}

/// A background call that has not ended yet.
#[pyclass(frozen, module = "lockward._native")]
pub(crate) struct Pending {
    abort: AbortHandle,
}

#[pymethods]
impl Pending {
    /// Cancels the call: a wait ends and leaves nothing held.
    fn cancel(&self) {
        self.abort.abort();
    }
}

/// Runs `work` in the background and calls `done(value, None)` or
/// `done(None, exception)` from a runtime thread when it ends (not when it
/// is cancelled). `into_py` makes the Python value.
///
/// `work` is polled once on the calling thread before this returns, so a
/// wait joins this process's line for its name at the call: the calls an
/// event loop makes one after another are served in that order (spawned
/// at once, two runtime threads could start them in either order).
pub(crate) fn settle<T, W, F>(
    py: Python<'_>,
    work: W,
    done: Py<PyAny>,
    into_py: F,
) -> PyResult<Pending>
where
    T: Send + 'static,
    W: Future<Output = lockward::Result<T>> + Send + 'static,
    F: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let runtime = runtime()?;
    let mut work = Box::pin(work);
    let first = py.detach(|| {
        let _context = runtime.enter();
        // The runtime's task polls it again (with its own waker) right
        // after the spawn below, so no wake-up is lost to this one.
        work.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    });
    let task = match first {
        Poll::Ready(outcome) => runtime.spawn(deliver(std::future::ready(outcome), done, into_py)),
        Poll::Pending => runtime.spawn(deliver(work, done, into_py)),
    };
    Ok(Pending {
        abort: task.abort_handle(),
    })
}

/// Awaits `work` and hands its outcome to `done`.
async fn deliver<T, F>(work: impl Future<Output = lockward::Result<T>>, done: Py<PyAny>, into_py: F)
where
    F: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>>,
{
    let outcome = work.await;
    Python::attach(|py| {
        let settled = match outcome.map_err(|e| to_py(&e)) {
            Ok(value) => into_py(py, value),
            Err(e) => Err(e),
        };
        let called = match settled {
            Ok(value) => done.call1(py, (value, py.None())),
            Err(e) => done.call1(py, (py.None(), e.value(py).clone())),
        };
        if let Err(e) = called {
            e.write_unraisable(py, None);
        }
    });
}

/// Runs `work` blocking and returns its value, or, given `done`, in the
/// background (returning a [`Pending`] at once, as [`settle`] does): one
/// native method serves both the blocking and the asyncio API.
pub(crate) fn now_or_later<T, W, F>(
    py: Python<'_>,
    work: W,
    done: Option<Py<PyAny>>,
    into_py: F,
) -> PyResult<Py<PyAny>>
where
    T: Send + 'static,
    W: Future<Output = lockward::Result<T>> + Send + 'static,
    F: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    match done {
        None => {
            let value = block_on(py, work)?;
            into_py(py, value)
        }
        Some(done) => Ok(Py::new(py, settle(py, work, done, into_py)?)?.into_any()),
    }
}
