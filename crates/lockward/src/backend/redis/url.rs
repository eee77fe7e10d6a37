//! The `redis://`, `rediss://` and `redis+cluster://` URL forms: one server
//! or a cluster's seed nodes, the database, ACL credentials, the key prefix
//! and TLS files.

use std::fmt;
use std::path::PathBuf;

use crate::error::Result;
use crate::url_parts::{url_error, write_auth, Endpoint, Parts, Secret};

/// Prefix of every key lockward writes on Redis (and on Redlock's masters)
/// unless the URL's `prefix=` says otherwise.
pub const DEFAULT_PREFIX: &str = "lockward:";

/// The parts of a `redis://`, `rediss://` or `redis+cluster://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisUrl {
    /// `rediss://`: connect with TLS.
    pub tls: bool,
    /// `redis+cluster://`: `endpoints` are seed nodes of a Redis Cluster.
    pub cluster: bool,
    /// The server, or the cluster's seed nodes.
    pub endpoints: Vec<Endpoint>,
    /// Database index (`/N`), 0 by default.
    pub db: u32,
    /// ACL user name.
    pub user: Option<String>,
    /// Password.
    pub password: Option<Secret>,
    /// Prefix of every key lockward writes, `lockward:` by default.
    pub prefix: String,
    /// TLS only: PEM file of trusted root certificates (`ca=`).
    pub ca: Option<PathBuf>,
    /// TLS only: client certificate and key PEM files (`cert=`, `key=`).
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

impl RedisUrl {
    /// Takes a `redis`, `rediss`, `redis+cluster` or `rediss+cluster` URL
    /// apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
        let tls = parts.scheme.starts_with("rediss");
        let cluster = parts.scheme.ends_with("+cluster");
        if tls {
            parts.expect_nothing_but(&["prefix", "ca", "cert", "key"])?;
        } else {
            parts.expect_nothing_but(&["prefix"])?;
        }
        let client_cert = parts.client_cert()?;
        let endpoints = if cluster {
            parts.endpoints(6379)?
        } else {
            vec![parts.single_endpoint(6379)?]
        };
        let db = match parts.path.trim_matches('/') {
            "" => 0,
            _ if cluster => {
                return Err(url_error(
                    "a Redis Cluster has only database 0; remove the /N from the URL",
                ))
            }
            n => n
                .parse()
                .map_err(|_| url_error(format!("the database index {n:?} is not a number")))?,
        };
        Ok(RedisUrl {
            tls,
            cluster,
            endpoints,
            db,
            user: parts.user.clone(),
            password: parts.password.clone(),
            prefix: parts.param("prefix").unwrap_or(DEFAULT_PREFIX).to_string(),
            ca: parts.param("ca").map(PathBuf::from),
            client_cert,
        })
    }

    /// The TLS files the URL names, with what each is.
    pub fn tls_files(&self) -> Vec<(&'static str, &std::path::Path)> {
        crate::url_parts::tls_files(&self.ca, &self.client_cert)
    }

    /// The URL's scheme.
    pub fn scheme(&self) -> &'static str {
        match (self.cluster, self.tls) {
            (true, true) => "rediss+cluster",
            (true, false) => "redis+cluster",
            (false, true) => "rediss",
            (false, false) => "redis",
        }
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self;
        write!(f, "{}://", r.scheme())?;
        write_auth(f, &r.user, &r.password)?;
        let hosts: Vec<String> = r.endpoints.iter().map(Endpoint::to_string).collect();
        write!(f, "{}", hosts.join(","))?;
        if r.db != 0 {
            write!(f, "/{}", r.db)?;
        }
        let mut params = Vec::new();
        if r.prefix != DEFAULT_PREFIX {
            params.push(format!("prefix={}", r.prefix));
        }
        if let Some(ca) = &r.ca {
            params.push(format!("ca={}", ca.display()));
        }
        if let Some((cert, key)) = &r.client_cert {
            params.push(format!("cert={}&key={}", cert.display(), key.display()));
        }
        if !params.is_empty() {
            write!(f, "?{}", params.join("&"))?;
        }
        Ok(())
    }
}
