//! The `postgres://` URL form: the server, role, database, lock table,
//! mode (lease or advisory) and TLS.

use std::fmt;
use std::path::PathBuf;

use crate::error::Result;
use crate::url_parts::{percent_decode, url_error, write_auth, Endpoint, Parts, Secret};

/// The lock table of lease mode unless `table=` says otherwise.
pub const DEFAULT_LEASE_TABLE: &str = "lockward_locks";
/// The lock table of advisory mode unless `table=` says otherwise (the
/// modes keep different rows, so they default to different tables).
pub const DEFAULT_ADVISORY_TABLE: &str = "lockward_advisory";

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
    /// The lock table (a plain SQL name): [`DEFAULT_LEASE_TABLE`] by default, or
    /// [`DEFAULT_ADVISORY_TABLE`] in advisory mode.
    pub table: String,
    /// Lease rows or advisory locks.
    pub mode: PostgresMode,
    /// `sslmode=require` (or `verify-full`): TLS, with the server's
    /// certificate and name always verified. Off by default.
    pub tls: bool,
    /// TLS only: PEM file of trusted roots (`ca=`); the system's otherwise.
    pub ca: Option<PathBuf>,
}

impl PostgresUrl {
    /// Takes a `postgres` or `postgresql` URL apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
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
        let user = parts
            .user
            .clone()
            .ok_or_else(|| url_error("postgres:// needs a user: postgres://USER@HOST/DB"))?;
        let db = parts.path.trim_matches('/');
        let db = if db.is_empty() {
            user.clone()
        } else {
            percent_decode(db)?
        };
        let mode_name = parts.param("mode").unwrap_or("lease");
        // The modes keep different rows, so they default to different tables.
        let default_table = if mode_name == "advisory" {
            DEFAULT_ADVISORY_TABLE
        } else {
            DEFAULT_LEASE_TABLE
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
        Ok(PostgresUrl {
            endpoint: parts.single_endpoint(5432)?,
            user,
            password: parts.password.clone(),
            db,
            table,
            mode,
            tls,
            ca: parts.param("ca").map(PathBuf::from),
        })
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self;
        f.write_str("postgres://")?;
        write_auth(f, &Some(p.user.clone()), &p.password)?;
        write!(f, "{}/{}", p.endpoint, p.db)?;
        let mut params = Vec::new();
        let default_table = match p.mode {
            PostgresMode::Lease => DEFAULT_LEASE_TABLE,
            PostgresMode::Advisory => DEFAULT_ADVISORY_TABLE,
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
}
