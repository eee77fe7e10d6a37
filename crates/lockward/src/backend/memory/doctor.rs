//! The doctor's finding on the memory store: its scope.

use crate::finding::{Finding, Level};

/// memory:// is private to one process.
pub(crate) fn check() -> Vec<Finding> {
    vec![Finding::new(
        Level::Warning,
        "scope",
        "memory:// is private to this process",
    )
    .advise("use sqlite:// for the processes of one host, a server for several hosts")]
}
