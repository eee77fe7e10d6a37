//! Seconds from Python (floats) as durations, refused with
//! `InvalidArgument` when negative, not a number or too long.

use std::time::Duration;

use pyo3::PyResult;

use crate::errors::invalid;

/// `seconds` as a duration; `what` names the argument in the error.
pub(crate) fn seconds(what: &str, seconds: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        invalid(format!(
            "{what}: {seconds} is not a number of seconds from 0 up"
        ))
    })
}

/// `seconds` as a duration, or `None` when absent.
pub(crate) fn optional_seconds(what: &str, value: Option<f64>) -> PyResult<Option<Duration>> {
    value.map(|s| seconds(what, s)).transpose()
}
