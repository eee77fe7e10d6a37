//! The `sqlite://PATH` URL form: the database file, `./.lockward/locks.db`
//! when the path is empty.

use std::path::PathBuf;

use crate::error::Result;
use crate::url_parts::{percent_decode, Parts};

/// Where the embedded default store keeps its file.
pub const DEFAULT_SQLITE_PATH: &str = "./.lockward/locks.db";

/// Takes a `sqlite` URL apart: the (percent-decoded) path of its file.
pub(crate) fn parse(parts: &Parts) -> Result<PathBuf> {
    parts.expect_nothing_but(&[])?;
    let path = if parts.raw_rest.is_empty() {
        DEFAULT_SQLITE_PATH.to_string()
    } else {
        percent_decode(&parts.raw_rest)?
    };
    Ok(PathBuf::from(path))
}
