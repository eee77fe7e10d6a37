//! The TLS files a URL names (`ca=`, `cert=`, `key=`), read so that one
//! that cannot be read is the URL's fault.

use std::path::PathBuf;

use super::url_error;
use crate::error::Result;

/// Reads a file a URL names (a CA, a client certificate or key): one that
/// cannot be read is a configuration error of the URL, not an unreachable
/// store.
#[cfg_attr(
    not(any(
        feature = "redis-tls",
        feature = "etcd-tls",
        feature = "postgres-tls",
        feature = "mysql",
        feature = "zookeeper-tls"
    )),
    allow(dead_code)
)]
pub(crate) fn read_file(what: &str, path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        url_error(format!(
            "cannot read the {what} file {}: {e}",
            path.display()
        ))
    })
}

/// The TLS files a URL names (`ca=`, and `cert=` with `key=`), with what
/// each is.
pub(crate) fn tls_files<'a>(
    ca: &'a Option<PathBuf>,
    client_cert: &'a Option<(PathBuf, PathBuf)>,
) -> Vec<(&'static str, &'a std::path::Path)> {
    let mut files = Vec::new();
    if let Some(ca) = ca {
        files.push(("CA", ca.as_path()));
    }
    if let Some((cert, key)) = client_cert {
        files.push(("client certificate", cert.as_path()));
        files.push(("client key", key.as_path()));
    }
    files
}
