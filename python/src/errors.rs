//! lockward's errors as the exceptions of `lockward.errors`: one class per
//! kind of the Rust error, named as its kind.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The exception of `kind` (a class of `lockward.errors`) with `message`.
fn exception(kind: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let class = py
            .import("lockward.errors")
            .and_then(|errors| errors.getattr(kind));
        match class.and_then(|class| class.call1((message.clone(),))) {
            Ok(raised) => PyErr::from_value(raised),
            Err(_) => PyRuntimeError::new_err(message),
        }
    })
}

/// `error` as the exception Python code catches.
pub(crate) fn to_py(error: &lockward::Error) -> PyErr {
    exception(error.kind(), error.to_string())
}

/// An argument lockward refuses.
pub(crate) fn invalid(message: String) -> PyErr {
    exception("InvalidArgument", message)
}
