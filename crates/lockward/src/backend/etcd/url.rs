//! The `etcd://` and `etcds://` URL forms: the cluster's endpoints,
//! credentials, the key prefix and the TLS roots.

use std::fmt;
use std::path::PathBuf;

use crate::error::Result;
use crate::url_parts::{url_error, write_auth, Endpoint, Parts, Secret};

/// Prefix of every key lockward writes on etcd unless `prefix=` says
/// otherwise; with it, `etcdctl lock lockward/NAME` and lockward's lock
/// NAME are one lock.
pub const DEFAULT_PREFIX: &str = "lockward/";

/// The parts of an `etcd://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdUrl {
    /// `etcds://`: connect with TLS.
    pub tls: bool,
    /// The cluster's client endpoints.
    pub endpoints: Vec<Endpoint>,
    /// User name for etcd's authentication.
    pub user: Option<String>,
    /// Password for etcd's authentication.
    pub password: Option<Secret>,
    /// Prefix of every key lockward writes, [`DEFAULT_PREFIX`] by default.
    pub prefix: String,
    /// TLS only: PEM file of trusted roots (`ca=`).
    pub ca: Option<PathBuf>,
}

impl EtcdUrl {
    /// Takes an `etcd` or `etcds` URL apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
        let tls = parts.scheme == "etcds";
        parts.expect_nothing_but(if tls { &["prefix", "ca"] } else { &["prefix"] })?;
        if !parts.path.trim_matches('/').is_empty() {
            return Err(url_error(
                "etcd:// takes no path; use ?prefix= for a namespace",
            ));
        }
        if parts.user.is_some() != parts.password.is_some() {
            return Err(url_error(
                "etcd authentication needs both a user and a password",
            ));
        }
        Ok(EtcdUrl {
            tls,
            endpoints: parts.endpoints(2379)?,
            user: parts.user.clone(),
            password: parts.password.clone(),
            prefix: parts.param("prefix").unwrap_or(DEFAULT_PREFIX).to_string(),
            ca: parts.param("ca").map(PathBuf::from),
        })
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for EtcdUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self;
        write!(f, "{}://", if e.tls { "etcds" } else { "etcd" })?;
        write_auth(f, &e.user, &e.password)?;
        let hosts: Vec<String> = e.endpoints.iter().map(Endpoint::to_string).collect();
        write!(f, "{}", hosts.join(","))?;
        let mut params = Vec::new();
        if e.prefix != DEFAULT_PREFIX {
            params.push(format!("prefix={}", e.prefix));
        }
        if let Some(ca) = &e.ca {
            params.push(format!("ca={}", ca.display()));
        }
        if !params.is_empty() {
            write!(f, "?{}", params.join("&"))?;
        }
        Ok(())
    }
}
