//! Store URLs: the one parser shared by the library and the CLI.
//!
//! | URL | backend |
//! | --- | --- |
//! | `memory://` | in-process |
//! | `sqlite://PATH` (empty: `./.lockward/locks.db`) | processes of one host |
//! | `redis://[user:pass@]host:port[/db][?prefix=…]`, `rediss://` | one Redis |
//! | `redis+cluster://[user:pass@]h1:port,h2:port,…[?prefix=…]`, `rediss+cluster://` | a Redis Cluster |
//! | `redlock://[user:pass@]h1:port,h2:port,h3:port[?prefix=…]` | N independent Redis masters |
//! | `etcd://[user:pass@]h1:2379,h2:2379[?prefix=…]`, `etcds://…?ca=PATH` | an etcd v3 cluster |
//! | `zk://[user:pass@]h1:2181,h2:2181[/chroot][?session_timeout=30s]` | a ZooKeeper ensemble |
//! | `postgres://user[:pass]@host:port/db[?table=…&mode=lease\|advisory]` | PostgreSQL |
//!
//! TLS URLs take `ca=PATH` (a PEM file of trusted roots; the system's roots
//! otherwise) and, for client certificates, `cert=PATH&key=PATH`.
//!
//! Passwords are kept in a [`Secret`], which never prints its value.

use std::fmt;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// Where the embedded default store keeps its file.
pub const DEFAULT_SQLITE_PATH: &str = "./.lockward/locks.db";

/// Schemes lockward knows, whether or not this build includes them.
const KNOWN_SCHEMES: &[&str] = &[
    "memory",
    "sqlite",
    "redis",
    "rediss",
    "redis+cluster",
    "rediss+cluster",
    "redlock",
    "etcd",
    "etcds",
    "zk",
    "postgres",
    "postgresql",
];

/// A password or other credential. Its `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The credential itself, for handing to a client library.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A `host:port` pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

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
    /// `redis://` or `rediss://`: one Redis server.
    Redis(RedisUrl),
    /// `redlock://`: N independent Redis masters, majority quorum.
    Redlock(RedlockUrl),
    /// `etcd://` or `etcds://`: an etcd v3 cluster.
    Etcd(EtcdUrl),
    /// `zk://`: a ZooKeeper ensemble.
    Zookeeper(ZookeeperUrl),
    /// `postgres://` (or `postgresql://`): PostgreSQL.
    Postgres(PostgresUrl),
}

/// The session timeout a `zk://` store asks for unless `session_timeout=`
/// says otherwise: as long as the default lock TTL, so a lock taken with
/// default options fits in its session.
pub const DEFAULT_ZK_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

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

/// How the PostgreSQL backend holds a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostgresMode {
    /// A row per name with an expiry on the server's clock (the default).
    Lease,
    /// A session advisory lock on a connection of its own, released by the
    /// server when that connection drops.
    Advisory,
}

/// The parts of a `postgres://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    /// The server.
    pub endpoint: Endpoint,
    /// Role to connect as.
    pub user: String,
    /// Its password.
    pub password: Option<Secret>,
    /// Database.
    pub db: String,
    /// The lock table (a plain SQL name): `lockward_locks` by default, or
    /// `lockward_advisory` in advisory mode.
    pub table: String,
    /// Lease rows or advisory locks.
    pub mode: PostgresMode,
    /// `sslmode=require` (or `verify-full`): TLS, with the server's
    /// certificate and name always verified. Off by default.
    pub tls: bool,
    /// TLS only: PEM file of trusted roots (`ca=`); the system's otherwise.
    pub ca: Option<PathBuf>,
}

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
    /// Prefix of every key lockward writes, `lockward/` by default; with it,
    /// `etcdctl lock lockward/NAME` and lockward's lock NAME are one lock.
    pub prefix: String,
    /// TLS only: PEM file of trusted roots (`ca=`).
    pub ca: Option<PathBuf>,
}

/// The parts of a `redlock://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedlockUrl {
    /// The masters: an odd number, at least 3.
    pub masters: Vec<Endpoint>,
    /// ACL user name, the same on every master.
    pub user: Option<String>,
    /// Password, the same on every master.
    pub password: Option<Secret>,
    /// Prefix of every key lockward writes, `lockward:` by default.
    pub prefix: String,
}

impl RedlockUrl {
    /// The `redis://` URL of one master.
    pub fn master(&self, endpoint: &Endpoint) -> RedisUrl {
        RedisUrl {
            tls: false,
            cluster: false,
            endpoints: vec![endpoint.clone()],
            db: 0,
            user: self.user.clone(),
            password: self.password.clone(),
            prefix: self.prefix.clone(),
            ca: None,
            client_cert: None,
        }
    }
}

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
        let parts = Parts::split(text)?;
        match parts.scheme.as_str() {
            "memory" => {
                parts.expect_nothing_but(&[])?;
                if !parts.rest_is_empty() {
                    return Err(url_error("memory:// takes nothing after the scheme"));
                }
                Ok(StoreUrl::Memory)
            }
            "sqlite" => {
                parts.expect_nothing_but(&[])?;
                let path = if parts.raw_rest.is_empty() {
                    DEFAULT_SQLITE_PATH.to_string()
                } else {
                    percent_decode(&parts.raw_rest)?
                };
                Ok(StoreUrl::Sqlite {
                    path: PathBuf::from(path),
                })
            }
            "redis" | "rediss" | "redis+cluster" | "rediss+cluster" => {
                let tls = parts.scheme.starts_with("rediss");
                let cluster = parts.scheme.ends_with("+cluster");
                if tls {
                    parts.expect_nothing_but(&["prefix", "ca", "cert", "key"])?;
                } else {
                    parts.expect_nothing_but(&["prefix"])?;
                }
                let client_cert = match (parts.param("cert"), parts.param("key")) {
                    (Some(c), Some(k)) => Some((PathBuf::from(c), PathBuf::from(k))),
                    (None, None) => None,
                    _ => return Err(url_error("cert= and key= go together")),
                };
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
                    n => n.parse().map_err(|_| {
                        url_error(format!("the database index {n:?} is not a number"))
                    })?,
                };
                Ok(StoreUrl::Redis(RedisUrl {
                    tls,
                    cluster,
                    endpoints,
                    db,
                    user: parts.user.clone(),
                    password: parts.password.clone(),
                    prefix: parts.param("prefix").unwrap_or("lockward:").to_string(),
                    ca: parts.param("ca").map(PathBuf::from),
                    client_cert,
                }))
            }
            "redlock" => {
                parts.expect_nothing_but(&["prefix"])?;
                if !parts.path.trim_matches('/').is_empty() {
                    return Err(url_error("redlock:// takes no database index"));
                }
                let masters = parts.endpoints(6379)?;
                if masters.len() < 3 || masters.len() % 2 == 0 {
                    return Err(url_error(format!(
                        "redlock:// needs an odd number of masters, at least 3 (got {}), \
                         so that any two majorities share a master",
                        masters.len()
                    )));
                }
                Ok(StoreUrl::Redlock(RedlockUrl {
                    masters,
                    user: parts.user.clone(),
                    password: parts.password.clone(),
                    prefix: parts.param("prefix").unwrap_or("lockward:").to_string(),
                }))
            }
            "etcd" | "etcds" => {
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
                Ok(StoreUrl::Etcd(EtcdUrl {
                    tls,
                    endpoints: parts.endpoints(2379)?,
                    user: parts.user.clone(),
                    password: parts.password.clone(),
                    prefix: parts.param("prefix").unwrap_or("lockward/").to_string(),
                    ca: parts.param("ca").map(PathBuf::from),
                }))
            }
            "zk" => {
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
                    None => DEFAULT_ZK_SESSION_TIMEOUT,
                    Some(text) => crate::duration::parse(text).map_err(|_| {
                        url_error(format!(
                            "session_timeout {text:?} is not a duration such as 10s or 1500ms"
                        ))
                    })?,
                };
                if session_timeout < std::time::Duration::from_millis(100) {
                    return Err(url_error("session_timeout must be at least 100ms"));
                }
                Ok(StoreUrl::Zookeeper(ZookeeperUrl {
                    endpoints: parts.endpoints(2181)?,
                    chroot: if chroot.is_empty() {
                        "/".into()
                    } else {
                        chroot
                    },
                    user: parts.user.clone(),
                    password: parts.password.clone(),
                    session_timeout,
                }))
            }
            "postgres" | "postgresql" => {
                parts.expect_nothing_but(&["table", "mode", "sslmode", "ca"])?;
                let tls = match parts.param("sslmode").unwrap_or("disable") {
                    "disable" => false,
                    "require" | "verify-full" => true,
                    other => {
                        return Err(url_error(format!(
                        "sslmode {other:?} is not supported: use disable, require or verify-full \
                             (lockward always verifies the server's certificate)"
                    )))
                    }
                };
                if parts.param("ca").is_some() && !tls {
                    return Err(url_error("ca= needs sslmode=require"));
                }
                let user = parts.user.clone().ok_or_else(|| {
                    url_error("postgres:// needs a user: postgres://USER@HOST/DB")
                })?;
                let db = parts.path.trim_matches('/');
                let db = if db.is_empty() {
                    user.clone()
                } else {
                    percent_decode(db)?
                };
                let mode_name = parts.param("mode").unwrap_or("lease");
                // The modes keep different rows, so they default to different tables.
                let default_table = if mode_name == "advisory" {
                    "lockward_advisory"
                } else {
                    "lockward_locks"
                };
                let table = parts.param("table").unwrap_or(default_table).to_string();
                let plain = |c: char| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit();
                if table.is_empty()
                    || table.len() > 50
                    || !table.chars().all(plain)
                    || table.starts_with(|c: char| c.is_ascii_digit())
                {
                    return Err(url_error(format!(
                        "table {table:?} must be a plain SQL name: lowercase letters, digits and _, at most 50"
                    )));
                }
                let mode = match mode_name {
                    "lease" => PostgresMode::Lease,
                    "advisory" => PostgresMode::Advisory,
                    other => {
                        return Err(url_error(format!(
                            "mode {other:?} is unknown; use mode=lease or mode=advisory"
                        )))
                    }
                };
                Ok(StoreUrl::Postgres(PostgresUrl {
                    endpoint: parts.single_endpoint(5432)?,
                    user,
                    password: parts.password.clone(),
                    db,
                    table,
                    mode,
                    tls,
                    ca: parts.param("ca").map(PathBuf::from),
                }))
            }
            other if KNOWN_SCHEMES.contains(&other) => Err(Error::Unsupported {
                scheme: other.to_string(),
                why: "this backend is not implemented in this version of lockward yet".into(),
            }),
            other => Err(url_error(format!(
                "unknown scheme {other:?}; expected one of {}",
                KNOWN_SCHEMES.join(", ")
            ))),
        }
    }

    /// The URL's scheme, e.g. `sqlite`.
    pub fn scheme(&self) -> &'static str {
        match self {
            StoreUrl::Memory => "memory",
            StoreUrl::Sqlite { .. } => "sqlite",
            StoreUrl::Redis(r) if r.cluster && r.tls => "rediss+cluster",
            StoreUrl::Redis(r) if r.cluster => "redis+cluster",
            StoreUrl::Redis(r) if r.tls => "rediss",
            StoreUrl::Redis(_) => "redis",
            StoreUrl::Redlock(_) => "redlock",
            StoreUrl::Etcd(e) if e.tls => "etcds",
            StoreUrl::Etcd(_) => "etcd",
            StoreUrl::Zookeeper(_) => "zk",
            StoreUrl::Postgres(_) => "postgres",
        }
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Memory => f.write_str("memory://"),
            StoreUrl::Sqlite { path } => write!(f, "sqlite://{}", path.display()),
            StoreUrl::Postgres(p) => {
                f.write_str("postgres://")?;
                write_auth(f, &Some(p.user.clone()), &p.password)?;
                write!(f, "{}/{}", p.endpoint, p.db)?;
                let mut params = Vec::new();
                let default_table = match p.mode {
                    PostgresMode::Lease => "lockward_locks",
                    PostgresMode::Advisory => "lockward_advisory",
                };
                if p.table != default_table {
                    params.push(format!("table={}", p.table));
                }
                if p.mode == PostgresMode::Advisory {
                    params.push("mode=advisory".to_string());
                }
                if p.tls {
                    params.push("sslmode=require".to_string());
                }
                if let Some(ca) = &p.ca {
                    params.push(format!("ca={}", ca.display()));
                }
                if !params.is_empty() {
                    write!(f, "?{}", params.join("&"))?;
                }
                Ok(())
            }
            StoreUrl::Etcd(e) => {
                write!(f, "{}://", self.scheme())?;
                write_auth(f, &e.user, &e.password)?;
                let hosts: Vec<String> = e.endpoints.iter().map(Endpoint::to_string).collect();
                write!(f, "{}", hosts.join(","))?;
                let mut params = Vec::new();
                if e.prefix != "lockward/" {
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
            StoreUrl::Zookeeper(z) => {
                f.write_str("zk://")?;
                write_auth(f, &z.user, &z.password)?;
                let hosts: Vec<String> = z.endpoints.iter().map(Endpoint::to_string).collect();
                write!(f, "{}", hosts.join(","))?;
                if z.chroot != "/" {
                    f.write_str(&z.chroot)?;
                }
                if z.session_timeout != DEFAULT_ZK_SESSION_TIMEOUT {
                    write!(f, "?session_timeout={}ms", z.session_timeout.as_millis())?;
                }
                Ok(())
            }
            StoreUrl::Redlock(r) => {
                f.write_str("redlock://")?;
                write_auth(f, &r.user, &r.password)?;
                let hosts: Vec<String> = r.masters.iter().map(Endpoint::to_string).collect();
                write!(f, "{}", hosts.join(","))?;
                if r.prefix != "lockward:" {
                    write!(f, "?prefix={}", r.prefix)?;
                }
                Ok(())
            }
            StoreUrl::Redis(r) => {
                write!(f, "{}://", self.scheme())?;
                write_auth(f, &r.user, &r.password)?;
                let hosts: Vec<String> = r.endpoints.iter().map(Endpoint::to_string).collect();
                write!(f, "{}", hosts.join(","))?;
                if r.db != 0 {
                    write!(f, "/{}", r.db)?;
                }
                let mut params = Vec::new();
                if r.prefix != "lockward:" {
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
    }
}

/// `user:***@`, with the password never printed.
fn write_auth(
    f: &mut fmt::Formatter<'_>,
    user: &Option<String>,
    password: &Option<Secret>,
) -> fmt::Result {
    match (user, password) {
        (Some(u), Some(p)) => write!(f, "{u}:{p}@"),
        (Some(u), None) => write!(f, "{u}@"),
        (None, Some(p)) => write!(f, ":{p}@"),
        (None, None) => Ok(()),
    }
}

fn url_error(why: impl Into<String>) -> Error {
    Error::invalid("url", why)
}

/// A URL split into its generic parts; each scheme then takes what it needs.
struct Parts {
    scheme: String,
    /// Everything after `scheme://` and before `?`, undecoded (for file paths).
    raw_rest: String,
    user: Option<String>,
    password: Option<Secret>,
    hosts: Vec<String>,
    path: String,
    params: Vec<(String, String)>,
}

impl Parts {
    fn split(text: &str) -> Result<Self> {
        let (scheme, rest) = text.split_once("://").ok_or_else(|| {
            url_error("a store URL starts with a scheme such as sqlite://, memory:// or redis://")
        })?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.')
        {
            return Err(url_error(format!("{scheme:?} is not a valid scheme")));
        }
        if rest.chars().any(|c| c.is_control()) {
            return Err(url_error("control characters are not allowed in a URL"));
        }
        let (body, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let mut params = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            params.push((percent_decode(k)?, percent_decode(v)?));
        }
        // The password may contain '@' or '/' only percent-encoded; the last
        // '@' before the first '/' ends the user information.
        let authority_end = body.find('/').unwrap_or(body.len());
        let (authority, path) = body.split_at(authority_end);
        let (userinfo, hostlist) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (u, p) = match info.split_once(':') {
                    Some((u, p)) => (u, Some(p)),
                    None => (info, None),
                };
                let user = Some(percent_decode(u)?).filter(|u| !u.is_empty());
                let password = p.map(percent_decode).transpose()?.map(Secret);
                (user, password)
            }
        };
        let hosts = hostlist
            .split(',')
            .filter(|h| !h.is_empty())
            .map(str::to_string)
            .collect();
        Ok(Parts {
            scheme,
            raw_rest: body.to_string(),
            user,
            password,
            hosts,
            path: path.to_string(),
            params,
        })
    }

    fn rest_is_empty(&self) -> bool {
        self.raw_rest.is_empty()
    }

    fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn expect_nothing_but(&self, allowed: &[&str]) -> Result<()> {
        match self
            .params
            .iter()
            .find(|(k, _)| !allowed.contains(&k.as_str()))
        {
            None => Ok(()),
            Some((k, _)) if allowed.is_empty() => Err(url_error(format!(
                "{}:// takes no query parameters, got {k:?}",
                self.scheme
            ))),
            Some((k, _)) => Err(url_error(format!(
                "unknown parameter {k:?} for {}://; known: {}",
                self.scheme,
                allowed.join(", ")
            ))),
        }
    }

    fn endpoints(&self, default_port: u16) -> Result<Vec<Endpoint>> {
        if self.hosts.is_empty() {
            return Err(url_error(format!(
                "{}:// needs at least one host",
                self.scheme
            )));
        }
        self.hosts
            .iter()
            .map(|h| parse_endpoint(h, default_port))
            .collect()
    }

    fn single_endpoint(&self, default_port: u16) -> Result<Endpoint> {
        match self.hosts.as_slice() {
            [one] => parse_endpoint(one, default_port),
            [] => Err(url_error(format!("{}:// needs a host", self.scheme))),
            _ => Err(url_error(format!(
                "{}:// takes one host; for several independent masters use redlock://",
                self.scheme
            ))),
        }
    }
}

fn parse_endpoint(text: &str, default_port: u16) -> Result<Endpoint> {
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| url_error(format!("unclosed '[' in host {text:?}")))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| url_error(format!("expected ':' after ']' in {text:?}")))?,
            ),
        };
        (host, port)
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(url_error(format!("empty host in {text:?}")));
    }
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            // The value is not echoed: in a mistyped URL it may be a password.
            .ok_or_else(|| url_error("the port is not a number from 1 to 65535"))?,
    };
    Ok(Endpoint {
        host: host.to_string(),
        port,
    })
}

fn percent_decode(text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| url_error("a '%' must be followed by two hex digits"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| url_error("percent-encoding decodes to invalid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded() {
        assert_eq!(StoreUrl::parse("memory://").unwrap(), StoreUrl::Memory);
        assert!(StoreUrl::parse("memory://x").is_err());
        assert_eq!(
            StoreUrl::parse("sqlite://").unwrap(),
            StoreUrl::Sqlite {
                path: DEFAULT_SQLITE_PATH.into()
            }
        );
        assert_eq!(
            StoreUrl::parse("sqlite:///var/lib/x.db").unwrap(),
            StoreUrl::Sqlite {
                path: "/var/lib/x.db".into()
            }
        );
        assert_eq!(
            StoreUrl::parse("sqlite://rel/my%20locks.db").unwrap(),
            StoreUrl::Sqlite {
                path: "rel/my locks.db".into()
            }
        );
        assert!(StoreUrl::parse("sqlite://a.db?x=1").is_err());
    }

    #[test]
    fn redis_parts_and_redaction() {
        let url = StoreUrl::parse("rediss://u:p%40ss@[::1]:7000/3?prefix=x:").unwrap();
        let StoreUrl::Redis(r) = &url else {
            panic!("not redis: {url:?}")
        };
        assert!(r.tls);
        assert_eq!(r.endpoints[0].host, "::1");
        assert_eq!(r.endpoints[0].port, 7000);
        assert_eq!(r.db, 3);
        assert_eq!(r.password.as_ref().unwrap().expose(), "p@ss");
        assert!(!url.to_string().contains("p@ss"));
        assert!(!format!("{url:?}").contains("p@ss"));
        assert_eq!(url.to_string(), "rediss://u:***@[::1]:7000/3?prefix=x:");
    }

    #[test]
    fn cluster_seeds() {
        let url = StoreUrl::parse("redis+cluster://a:1,b:2,c?prefix=x:").unwrap();
        let StoreUrl::Redis(r) = &url else {
            panic!("not redis: {url:?}")
        };
        assert!(r.cluster);
        assert_eq!(r.endpoints.len(), 3);
        assert_eq!(r.endpoints[2].port, 6379);
        assert_eq!(url.to_string(), "redis+cluster://a:1,b:2,c:6379?prefix=x:");
        assert!(StoreUrl::parse("redis+cluster://a:1/2").is_err());
        assert!(StoreUrl::parse("redis+cluster://").is_err());
        let tls = StoreUrl::parse("rediss+cluster://a:1?ca=/x/ca.pem").unwrap();
        assert_eq!(tls.scheme(), "rediss+cluster");
        assert!(
            StoreUrl::parse("redis://a:1?ca=/x").is_err(),
            "ca= needs TLS"
        );
        assert!(
            StoreUrl::parse("rediss://a:1?cert=/c").is_err(),
            "cert without key"
        );
    }

    #[test]
    fn redlock_masters() {
        let url = StoreUrl::parse("redlock://:pw@a:1,b:2,c:3").unwrap();
        let StoreUrl::Redlock(r) = &url else {
            panic!("not redlock: {url:?}")
        };
        assert_eq!(r.masters.len(), 3);
        assert_eq!(url.to_string(), "redlock://:***@a:1,b:2,c:3");
        for bad in [
            "redlock://a:1",
            "redlock://a:1,b:2",
            "redlock://a:1,b:2,c:3,d:4",
        ] {
            let err = StoreUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains("odd number"), "{bad}: {err}");
        }
    }

    #[test]
    fn etcd_endpoints() {
        let url = StoreUrl::parse("etcd://root:pw@a,b:2380?prefix=").unwrap();
        let StoreUrl::Etcd(e) = &url else {
            panic!("not etcd: {url:?}")
        };
        assert_eq!(e.endpoints[0].port, 2379);
        assert_eq!(e.prefix, "");
        assert_eq!(url.to_string(), "etcd://root:***@a:2379,b:2380?prefix=");
        assert!(StoreUrl::parse("etcd://a/x").is_err());
        assert!(StoreUrl::parse("etcd://u@a").is_err());
    }

    #[test]
    fn postgres_parts() {
        let url =
            StoreUrl::parse("postgres://app:pw@db:6000/pay?mode=advisory&table=locks_2").unwrap();
        let StoreUrl::Postgres(p) = &url else {
            panic!("not postgres: {url:?}")
        };
        assert_eq!(
            (p.user.as_str(), p.db.as_str(), p.table.as_str()),
            ("app", "pay", "locks_2")
        );
        assert_eq!(p.mode, PostgresMode::Advisory);
        assert_eq!(
            url.to_string(),
            "postgres://app:***@db:6000/pay?table=locks_2&mode=advisory"
        );
        for bad in [
            "postgres://db/x",
            "postgres://u@db?table=Bad",
            "postgres://u@db?table=x;drop",
            "postgres://u@db?mode=x",
        ] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn errors_name_the_problem() {
        for (url, needle) in [
            ("nope", "scheme"),
            ("ftp://x", "unknown scheme"),
            ("redis://", "needs a host"),
            ("redis://h:99999", "port"),
            ("redis://h:1/abc", "database index"),
            ("redis://h:1?foo=1", "unknown parameter"),
            ("redis://a:1,b:2", "redlock"),
            ("sqlite://a%zz", "hex"),
        ] {
            let err = StoreUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
        }
        for (url, needle) in [
            ("zk://", "at least one host"),
            ("zk://u@h", "both a user and a password"),
            ("zk://h/a//b", "segment"),
            ("zk://h/a/..", "segment"),
            ("zk://h?session_timeout=soon", "session_timeout"),
            ("zk://h?session_timeout=5ms", "at least 100ms"),
            ("zk://h?prefix=x", "unknown parameter"),
        ] {
            let err = StoreUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
        }
    }

    #[test]
    fn zookeeper_urls() {
        let url = StoreUrl::parse("zk://app:pw@a:2181,b/svc/locks/?session_timeout=5s").unwrap();
        let StoreUrl::Zookeeper(z) = &url else {
            panic!("{url:?}")
        };
        assert_eq!(z.endpoints.len(), 2);
        assert_eq!(z.endpoints[1].port, 2181);
        assert_eq!(z.chroot, "/svc/locks");
        assert_eq!(z.session_timeout, std::time::Duration::from_secs(5));
        assert_eq!(
            url.to_string(),
            "zk://app:***@a:2181,b:2181/svc/locks?session_timeout=5000ms"
        );
        let plain = StoreUrl::parse("zk://h").unwrap();
        assert_eq!(plain.to_string(), "zk://h:2181");
    }

    #[test]
    fn password_never_in_errors() {
        for url in [
            "redis://u:hunter2@h:notaport",
            "redis://u:hunter2",
            "redis://u:hunter2@",
        ] {
            let err = StoreUrl::parse(url).unwrap_err();
            assert!(!err.to_string().contains("hunter2"), "{err}");
        }
    }
}
