//! Store URLs: the one parser shared by the library and the CLI. This file
//! holds the scheme dispatch; the lexer every scheme shares lives in
//! `url_parts/`, and each backend's own URL form (its parts, defaults and
//! printing) in its folder, `backend/<name>/url.rs`.
//!
//! | URL | backend |
//! | --- | --- |
//! | `memory://` | in-process |
//! | `sqlite://PATH` (empty: `./.lockward/locks.db`) | processes of one host |
//! | `redis://[user:pass@]host:port[/db][?prefix=…]`, `rediss://` | one Redis |
//! | `redis+cluster://[user:pass@]h1:port,h2:port,…[?prefix=…]`, `rediss+cluster://` | a Redis Cluster |
//! | `redis+sentinel://[user:pass@]s1:26379,s2:26379/PRIMARY[/db][?prefix=…&sentinel_password=…]`, `rediss+sentinel://` | the primary Redis Sentinel names |
//! | `redlock://[user:pass@]h1:port,h2:port,h3:port[?prefix=…]` | N independent Redis masters |
//! | `etcd://[user:pass@]h1:2379,h2:2379[?prefix=…]`, `etcds://…?ca=PATH` | an etcd v3 cluster |
//! | `zk://[user:pass@]h1:2181,h2:2181[/chroot][?session_timeout=30s]`, `zks://…?ca=PATH` | a ZooKeeper ensemble |
//! | `postgres://user[:pass]@host:port/db[?table=…&mode=lease\|advisory]` | PostgreSQL |
//! | `mysql://user[:pass]@host:port/db[?table=…&mode=lease\|named&ssl-mode=…&ca=PATH]`, `mariadb://` | MySQL or MariaDB |
//! | `k8s://[NAMESPACE][?kubeconfig=PATH&context=NAME&prefix=…]`, `kubernetes://` | Kubernetes Leases |
//!
//! TLS URLs take `ca=PATH` (a PEM file of trusted roots; the system's roots
//! otherwise) and, for client certificates, `cert=PATH&key=PATH`.
//!
//! Passwords are kept in a [`Secret`], which never prints its value.

use std::fmt;
use std::path::PathBuf;

pub use crate::backend::etcd::url::EtcdUrl;
pub use crate::backend::kubernetes::url::KubernetesUrl;
pub use crate::backend::mysql::url::{MysqlMode, MysqlUrl, SslMode as MysqlSslMode};
pub use crate::backend::postgres::url::{PostgresMode, PostgresUrl};
pub use crate::backend::redis::url::RedisUrl;
pub use crate::backend::redlock::url::RedlockUrl;
pub use crate::backend::sqlite::url::DEFAULT_SQLITE_PATH;
pub use crate::backend::zookeeper::url::{
    ZookeeperUrl, DEFAULT_SESSION_TIMEOUT as DEFAULT_ZK_SESSION_TIMEOUT,
};
use crate::error::{Error, Result};
use crate::url_parts::{url_error, Parts};
pub use crate::url_parts::{Endpoint, Secret};

/// Schemes lockward knows, for the message on an unknown one.
pub(crate) const SCHEMES: &[&str] = &[
    "memory",
    "sqlite",
    "redis",
    "rediss",
    "redis+cluster",
    "rediss+cluster",
    "redis+sentinel",
    "rediss+sentinel",
    "redlock",
    "etcd",
    "etcds",
    "zk",
    "zks",
    "postgres",
    "postgresql",
    "mysql",
    "mariadb",
    "k8s",
    "kubernetes",
];

/// A parsed store URL.
///
/// ```
/// use lockward::StoreUrl;
/// let url: StoreUrl = "redis://app:s3cret@127.0.0.1:6379/2?prefix=pay:".parse().unwrap();
/// assert_eq!(url.to_string(), "redis://app:***@127.0.0.1:6379/2?prefix=pay:");
/// assert!("ftp://x".parse::<StoreUrl>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// `memory://`: one process.
    Memory,
    /// `sqlite://PATH`: the processes of one host.
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
    /// `redis://` or `rediss://`: one Redis server; `redis+cluster://`: a
    /// cluster; `redis+sentinel://`: the primary that Sentinel names.
    Redis(RedisUrl),
    /// `redlock://`: N independent Redis masters, majority quorum.
    Redlock(RedlockUrl),
    /// `etcd://` or `etcds://`: an etcd v3 cluster.
    Etcd(EtcdUrl),
    /// `zk://`: a ZooKeeper ensemble.
    Zookeeper(ZookeeperUrl),
    /// `postgres://` (or `postgresql://`): PostgreSQL.
    Postgres(PostgresUrl),
    /// `mysql://` (or `mariadb://`): MySQL or MariaDB.
    Mysql(MysqlUrl),
    /// `k8s://` (or `kubernetes://`): Leases on a Kubernetes API server.
    Kubernetes(KubernetesUrl),
}

impl std::str::FromStr for StoreUrl {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        StoreUrl::parse(s)
    }
}

impl StoreUrl {
    /// Parses a store URL. Errors say which part was wrong and never repeat
    /// a password.
    pub fn parse(text: &str) -> Result<Self> {
        StoreUrl::parse_parts(text).map_err(|e| redact::without_userinfo(e, text))
    }

    fn parse_parts(text: &str) -> Result<Self> {
        let parts = Parts::split(text)?;
        match parts.scheme.as_str() {
            "memory" => {
                parts.expect_nothing_but(&[])?;
                if !parts.rest_is_empty() {
                    return Err(url_error("memory:// takes nothing after the scheme"));
                }
                Ok(StoreUrl::Memory)
            }
            "sqlite" => Ok(StoreUrl::Sqlite {
                path: crate::backend::sqlite::url::parse(&parts)?,
            }),
            "redis" | "rediss" | "redis+cluster" | "rediss+cluster" | "redis+sentinel"
            | "rediss+sentinel" => RedisUrl::parse(&parts).map(StoreUrl::Redis),
            "redlock" => RedlockUrl::parse(&parts).map(StoreUrl::Redlock),
            "etcd" | "etcds" => EtcdUrl::parse(&parts).map(StoreUrl::Etcd),
            "zk" | "zks" => ZookeeperUrl::parse(&parts).map(StoreUrl::Zookeeper),
            "postgres" | "postgresql" => PostgresUrl::parse(&parts).map(StoreUrl::Postgres),
            "mysql" | "mariadb" => MysqlUrl::parse(&parts).map(StoreUrl::Mysql),
            "k8s" | "kubernetes" => KubernetesUrl::parse(&parts).map(StoreUrl::Kubernetes),
            other => Err(url_error(format!(
                "unknown scheme {other:?}; expected one of {}",
                SCHEMES.join(", ")
            ))),
        }
    }

    /// The URL's scheme, e.g. `sqlite`.
    pub fn scheme(&self) -> &'static str {
        match self {
            StoreUrl::Memory => "memory",
            StoreUrl::Sqlite { .. } => "sqlite",
            StoreUrl::Redis(r) => r.scheme(),
            StoreUrl::Redlock(_) => "redlock",
            StoreUrl::Etcd(e) if e.tls => "etcds",
            StoreUrl::Etcd(_) => "etcd",
            StoreUrl::Zookeeper(z) if z.tls => "zks",
            StoreUrl::Zookeeper(_) => "zk",
            StoreUrl::Postgres(_) => "postgres",
            StoreUrl::Mysql(_) => "mysql",
            StoreUrl::Kubernetes(_) => "k8s",
        }
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Memory => f.write_str("memory://"),
            StoreUrl::Sqlite { path } => write!(f, "sqlite://{}", path.display()),
            StoreUrl::Redis(r) => r.fmt(f),
            StoreUrl::Redlock(r) => r.fmt(f),
            StoreUrl::Etcd(e) => e.fmt(f),
            StoreUrl::Zookeeper(z) => z.fmt(f),
            StoreUrl::Postgres(p) => p.fmt(f),
            StoreUrl::Mysql(m) => m.fmt(f),
            StoreUrl::Kubernetes(k) => k.fmt(f),
        }
    }
}

mod redact;

#[cfg(test)]
mod tests;
