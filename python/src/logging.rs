//! lockward's events through Python's `logging`, under the logger
//! `lockward` (`lockward.store.acquire`, `lockward.renewer`, …).

use std::sync::OnceLock;

use log::LevelFilter;
use pyo3::prelude::*;
use pyo3_log::{Caching, Logger, ResetHandle};

/// Forgets the levels cached so far, once installed.
static RESET: OnceLock<ResetHandle> = OnceLock::new();

/// Sends lockward's events (from debug up) and its dependencies' warnings
/// to Python's `logging`, and adds `reset_logging` to the module.
///
/// Each logger's level is read once and cached, so that an event below it
/// costs no call into Python; `reset_logging` makes a level set later count.
pub(crate) fn install(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let logger = Logger::new(module.py(), Caching::LoggersAndLevels)?
        .filter(LevelFilter::Warn)
        .filter_target("lockward".to_owned(), LevelFilter::Debug);
    // Another extension in the process may have taken the `log` crate's
    // one logger: lockward then logs through it.
    if let Ok(handle) = logger.install() {
        let _ = RESET.set(handle);
    }
    module.add_function(wrap_pyfunction!(reset_logging, module)?)
}

/// Makes levels set on lockward's loggers since its first event count.
#[pyfunction]
fn reset_logging() {
    if let Some(handle) = RESET.get() {
        handle.reset();
    }
}
