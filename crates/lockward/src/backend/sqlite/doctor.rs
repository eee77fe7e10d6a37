//! The doctor's finding on a SQLite store: its scope.

use std::path::Path;

use crate::finding::{Finding, Level};

/// A SQLite file serves the processes of one host.
pub(crate) fn check(path: &Path) -> Vec<Finding> {
    vec![Finding::new(
        Level::Ok,
        "scope",
        format!(
            "{}: the processes of this host (expiry on the boot clock; a reboot frees every lock)",
            path.display()
        ),
    )]
}
