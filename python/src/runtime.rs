//! One tokio runtime per process. A child made by `os.fork()` inherits the
//! parent's runtime without its threads; it gets a runtime of its own at
//! its first call and never touches the parent's.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyRuntimeError;
use pyo3::PyResult;
use tokio::runtime::Runtime;

/// The runtime, and the process it was made in.
static CURRENT: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// This process's runtime, made at the first call in each process.
pub(crate) fn runtime() -> PyResult<Arc<Runtime>> {
    let pid = std::process::id();
    let mut current = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((owner, runtime)) = current.as_ref() {
        if *owner == pid {
            return Ok(runtime.clone());
        }
    }
    if let Some((_, inherited)) = current.take() {
        // The parent's: its threads do not exist here, and dropping it
        // would wait for them forever.
        std::mem::forget(inherited);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("lockward")
        .build()
        .map(Arc::new)
        .map_err(|e| PyRuntimeError::new_err(format!("lockward cannot start its runtime: {e}")))?;
    *current = Some((pid, runtime.clone()));
    Ok(runtime)
}
