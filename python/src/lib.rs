//! The native part of the Python package `lockward`: lockward's stores and
//! locks for Python, on a tokio runtime of the process's own. The Python
//! modules beside it (`lockward/*.py`) are the API; this module is theirs.

use pyo3::prelude::*;

mod durations;
mod errors;
mod lease;
mod limits;
mod logging;
mod rows;
mod runtime;
mod store;
mod task;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::Store>()?;
    m.add_class::<lease::Lease>()?;
    m.add_class::<task::Pending>()?;
    logging::install(m)?;
    Ok(())
}
