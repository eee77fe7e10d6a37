//! The `zk://` URL form: the ensemble, the chroot, digest credentials and
//! the session timeout to ask for.

use std::fmt;

use crate::error::Result;
use crate::url::{percent_decode, url_error, write_auth, Endpoint, Parts, Secret};

/// The session timeout a `zk://` store asks for unless `session_timeout=`
/// says otherwise: as long as the default lock TTL, so a lock taken with
/// default options fits in its session.
pub const DEFAULT_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The parts of a `zk://` URL.
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
}

impl ZookeeperUrl {
    /// Takes a `zk` URL apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
        parts.expect_nothing_but(&["session_timeout"])?;
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
        })
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for ZookeeperUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let z = self;
        f.write_str("zk://")?;
        write_auth(f, &z.user, &z.password)?;
        let hosts: Vec<String> = z.endpoints.iter().map(Endpoint::to_string).collect();
        write!(f, "{}", hosts.join(","))?;
        if z.chroot != "/" {
            f.write_str(&z.chroot)?;
        }
        if z.session_timeout != DEFAULT_SESSION_TIMEOUT {
            write!(f, "?session_timeout={}ms", z.session_timeout.as_millis())?;
        }
        Ok(())
    }
}
