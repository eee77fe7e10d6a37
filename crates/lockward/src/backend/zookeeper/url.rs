//! The `zk://` and `zks://` (TLS) URL forms: the ensemble, the chroot,
//! digest credentials, the session timeout to ask for, and TLS files.

use std::fmt;
use std::path::PathBuf;

use crate::error::Result;
use crate::url_parts::{percent_decode, url_error, write_auth, Endpoint, Parts, Secret};

/// The session timeout a `zk://` store asks for unless `session_timeout=`
/// says otherwise: as long as the default lock TTL, so a lock taken with
/// default options fits in its session.
pub const DEFAULT_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The parts of a `zk://` or `zks://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZookeeperUrl {
    /// The ensemble's client endpoints.
    pub endpoints: Vec<Endpoint>,
    /// The node under which lockward keeps everything (`/` when the URL has
    /// no path); locks live in `CHROOT/lockward/NAME`.
    pub chroot: String,
    /// User for digest authentication.
    pub user: Option<String>,
    /// Password for digest authentication.
    pub password: Option<Secret>,
    /// The session timeout to ask for (`session_timeout=`); the server may
    /// grant a shorter one, within its `minSessionTimeout..maxSessionTimeout`.
    /// A lock's TTL cannot exceed the granted timeout.
    pub session_timeout: std::time::Duration,
    /// `zks://`: connect with TLS (the server's `secureClientPort`).
    pub tls: bool,
    /// TLS only: PEM file of trusted roots (`ca=`); the well-known roots
    /// otherwise.
    pub ca: Option<PathBuf>,
    /// TLS only: client certificate and key PEM files (`cert=`, `key=`).
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

impl ZookeeperUrl {
    /// The TLS files the URL names, with what each is.
    pub fn tls_files(&self) -> Vec<(&'static str, &std::path::Path)> {
        crate::url_parts::tls_files(&self.ca, &self.client_cert)
    }

    /// Takes a `zk` or `zks` URL apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
        let tls = parts.scheme == "zks";
        if tls {
            parts.expect_nothing_but(&["session_timeout", "ca", "cert", "key"])?;
        } else {
            parts.expect_nothing_but(&["session_timeout"])?;
        }
        let client_cert = parts.client_cert()?;
        if parts.user.is_some() != parts.password.is_some() {
            return Err(url_error(
                "ZooKeeper digest authentication needs both a user and a password",
            ));
        }
        let chroot = percent_decode(parts.path.trim_end_matches('/'))?;
        if chroot
            .split('/')
            .skip(1)
            .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return Err(url_error(format!(
                "the chroot {chroot:?} has an empty, '.' or '..' segment"
            )));
        }
        let session_timeout = match parts.param("session_timeout") {
            None => DEFAULT_SESSION_TIMEOUT,
            Some(text) => crate::duration::parse(text).map_err(|_| {
                url_error(format!(
                    "session_timeout {text:?} is not a duration such as 10s or 1500ms"
                ))
            })?,
        };
        if session_timeout < std::time::Duration::from_millis(100) {
            return Err(url_error("session_timeout must be at least 100ms"));
        }
        Ok(ZookeeperUrl {
            endpoints: parts.endpoints(2181)?,
            chroot: if chroot.is_empty() {
                "/".into()
            } else {
                chroot
            },
            user: parts.user.clone(),
            password: parts.password.clone(),
            session_timeout,
            tls,
            ca: parts.param("ca").map(PathBuf::from),
            client_cert,
        })
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for ZookeeperUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let z = self;
        f.write_str(if z.tls { "zks://" } else { "zk://" })?;
        write_auth(f, &z.user, &z.password)?;
        let hosts: Vec<String> = z.endpoints.iter().map(Endpoint::to_string).collect();
        write!(f, "{}", hosts.join(","))?;
        if z.chroot != "/" {
            f.write_str(&z.chroot)?;
        }
        let mut params = Vec::new();
        if z.session_timeout != DEFAULT_SESSION_TIMEOUT {
            params.push(format!(
                "session_timeout={}ms",
                z.session_timeout.as_millis()
            ));
        }
        if let Some(ca) = &z.ca {
            params.push(format!("ca={}", ca.display()));
        }
        if let Some((cert, key)) = &z.client_cert {
            params.push(format!("cert={}&key={}", cert.display(), key.display()));
        }
        if !params.is_empty() {
            write!(f, "?{}", params.join("&"))?;
        }
        Ok(())
    }
}
