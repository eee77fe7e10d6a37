//! The `redis://`, `rediss://`, `redis+cluster://` and `redis+sentinel://`
//! URL forms: one server, a cluster's seed nodes or the sentinels that name
//! a primary, the database, ACL credentials, the key prefix, TLS files and
//! the replicas a grant waits for.

use std::fmt;
use std::path::PathBuf;

use crate::error::Result;
use crate::url_parts::{url_error, write_auth, Endpoint, Parts, Secret};

/// Prefix of every key lockward writes on Redis (and on Redlock's masters)
/// unless the URL's `prefix=` says otherwise.
pub const DEFAULT_PREFIX: &str = "lockward:";

/// Port of a sentinel unless the URL says otherwise.
pub const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// How long a grant waits for its replicas unless `replicas_timeout=` says.
pub const DEFAULT_REPLICAS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The most replicas `replicas=` may ask for.
const MAX_REPLICAS: u32 = 64;

/// The longest `replicas_timeout=`: `WAIT` is one command, and a command's
/// reply is awaited 2 s (a paused server, a cut link).
const MAX_REPLICAS_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1_500);

/// The parts of a `redis://`, `rediss://`, `redis+cluster://` or
/// `redis+sentinel://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisUrl {
    /// `rediss://`: connect with TLS.
    pub tls: bool,
    /// `redis+cluster://`: `endpoints` are seed nodes of a Redis Cluster.
    pub cluster: bool,
    /// `redis+sentinel://`: `endpoints` are sentinels, which name the
    /// primary to use.
    pub sentinel: Option<SentinelUrl>,
    /// The server, the cluster's seed nodes, or the sentinels.
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
    /// `replicas=N[&replicas_timeout=D]`: a grant or renewal is answered
    /// only once N replicas confirm they have it (`WAIT`).
    pub replicas: Option<Replicas>,
}

/// How many replicas must confirm a grant, and how long to wait for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replicas {
    /// How many (`replicas=`, 1 to 64).
    pub count: u32,
    /// How long to wait (`replicas_timeout=`, 1 s by default, at most
    /// 1.5 s).
    pub timeout: std::time::Duration,
}

/// What a `redis+sentinel://` URL says beyond the sentinels' addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelUrl {
    /// The name the sentinels monitor the primary under (the path).
    pub primary: String,
    /// ACL user for the sentinels themselves (`sentinel_user=`); the URL's
    /// own credentials are the data nodes'.
    pub user: Option<String>,
    /// Password for the sentinels (`sentinel_password=`).
    pub password: Option<Secret>,
}

impl RedisUrl {
    /// Takes a `redis`, `rediss`, `redis+cluster`, `rediss+cluster`,
    /// `redis+sentinel` or `rediss+sentinel` URL apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
        let tls = parts.scheme.starts_with("rediss");
        let cluster = parts.scheme.ends_with("+cluster");
        let sentinels = parts.scheme.ends_with("+sentinel");
        let mut allowed = vec!["prefix", "replicas", "replicas_timeout"];
        if tls {
            allowed.extend(["ca", "cert", "key"]);
        }
        if sentinels {
            allowed.extend(["sentinel_user", "sentinel_password"]);
        }
        parts.expect_nothing_but(&allowed)?;
        let client_cert = parts.client_cert()?;
        let endpoints = if cluster {
            parts.endpoints(6379)?
        } else if sentinels {
            parts.endpoints(DEFAULT_SENTINEL_PORT)?
        } else {
            vec![parts.single_endpoint(6379)?]
        };
        let mut path = parts.path.trim_matches('/');
        let sentinel = if sentinels {
            let (primary, db) = path.split_once('/').unwrap_or((path, ""));
            if primary.is_empty() {
                return Err(url_error(
                    "name the primary the sentinels monitor in the path: redis+sentinel://HOST:26379/NAME",
                ));
            }
            path = db;
            Some(SentinelUrl {
                primary: primary.to_string(),
                user: parts.param("sentinel_user").map(str::to_string),
                password: parts.param("sentinel_password").map(Secret::new),
            })
        } else {
            None
        };
        let db = match path {
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
        let replicas = replicas(parts, cluster)?;
        Ok(RedisUrl {
            replicas,
            tls,
            cluster,
            sentinel,
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
        match (self.cluster, self.sentinel.is_some(), self.tls) {
            (true, _, true) => "rediss+cluster",
            (true, _, false) => "redis+cluster",
            (false, true, true) => "rediss+sentinel",
            (false, true, false) => "redis+sentinel",
            (false, false, true) => "rediss",
            (false, false, false) => "redis",
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
        if let Some(sentinel) = &r.sentinel {
            write!(f, "/{}", sentinel.primary)?;
        }
        if r.db != 0 {
            write!(f, "/{}", r.db)?;
        }
        let mut params = Vec::new();
        if r.prefix != DEFAULT_PREFIX {
            params.push(format!("prefix={}", r.prefix));
        }
        if let Some(sentinel) = &r.sentinel {
            if let Some(user) = &sentinel.user {
                params.push(format!("sentinel_user={user}"));
            }
            if sentinel.password.is_some() {
                params.push("sentinel_password=***".to_string());
            }
        }
        if let Some(replicas) = &r.replicas {
            params.push(format!("replicas={}", replicas.count));
            if replicas.timeout != DEFAULT_REPLICAS_TIMEOUT {
                params.push(format!(
                    "replicas_timeout={}ms",
                    replicas.timeout.as_millis()
                ));
            }
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

/// The URL's `replicas=` and `replicas_timeout=`.
fn replicas(parts: &Parts, cluster: bool) -> Result<Option<Replicas>> {
    let Some(count) = parts.param("replicas") else {
        if parts.param("replicas_timeout").is_some() {
            return Err(url_error("replicas_timeout= needs replicas=N beside it"));
        }
        return Ok(None);
    };
    let count: u32 = count
        .parse()
        .ok()
        .filter(|n| (1..=MAX_REPLICAS).contains(n))
        .ok_or_else(|| {
            url_error(format!(
                "replicas={count:?}: give how many replicas must confirm a grant, 1 to {MAX_REPLICAS}"
            ))
        })?;
    if cluster {
        return Err(url_error(
            "replicas= is not supported on a Redis Cluster: WAIT must follow the grant on its node's connection; use redis:// or redis+sentinel://",
        ));
    }
    let timeout = match parts.param("replicas_timeout") {
        None => DEFAULT_REPLICAS_TIMEOUT,
        Some(text) => crate::duration::parse(text)
            .ok()
            .filter(|d| (std::time::Duration::from_millis(1)..=MAX_REPLICAS_TIMEOUT).contains(d))
            .ok_or_else(|| {
                url_error(format!(
                    "replicas_timeout {text:?}: give a duration from 1ms to {}ms, such as 500ms",
                    MAX_REPLICAS_TIMEOUT.as_millis()
                ))
            })?,
    };
    Ok(Some(Replicas { count, timeout }))
}
