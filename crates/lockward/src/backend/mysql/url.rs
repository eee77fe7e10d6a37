//! The `mysql://` URL form (and `mariadb://`): the server, user, database,
//! lock table, mode (lease or named) and TLS.

use std::fmt;
use std::path::PathBuf;

use crate::error::Result;
use crate::url_parts::{percent_decode, url_error, write_auth, Endpoint, Parts, Secret};

/// The lock table of lease mode unless `table=` says otherwise.
pub const DEFAULT_LEASE_TABLE: &str = "lockward_locks";
/// The lock table of named mode unless `table=` says otherwise (the modes
/// keep different rows, so they default to different tables).
pub const DEFAULT_NAMED_TABLE: &str = "lockward_named";

/// How the MySQL backend holds a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MysqlMode {
    /// A row per name with an expiry on the server's clock (the default).
    Lease,
    /// A named lock (`GET_LOCK`) on a connection of its own, released by
    /// the server when that connection ends.
    Named,
}

/// How the connection is secured (`ssl-mode=`, as MySQL's clients name it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP (the default).
    Disabled,
    /// TLS, with the server's certificate chain verified (lockward never
    /// skips that, unlike MySQL's own clients in this mode).
    Required,
    /// TLS, with the server's certificate chain verified.
    VerifyCa,
    /// TLS, with the chain and the server's name verified.
    VerifyIdentity,
}

impl SslMode {
    /// The name `ssl-mode=` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disabled => "DISABLED",
            SslMode::Required => "REQUIRED",
            SslMode::VerifyCa => "VERIFY_CA",
            SslMode::VerifyIdentity => "VERIFY_IDENTITY",
        }
    }
}

/// The parts of a `mysql://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MysqlUrl {
    /// The server.
    pub endpoint: Endpoint,
    /// User to connect as.
    pub user: String,
    /// Its password.
    pub password: Option<Secret>,
    /// Database.
    pub db: String,
    /// The lock table (a plain SQL name): [`DEFAULT_LEASE_TABLE`] by
    /// default, or [`DEFAULT_NAMED_TABLE`] in named mode. The record tables
    /// are named after it.
    pub table: String,
    /// Lease rows or named locks.
    pub mode: MysqlMode,
    /// Plain or TLS.
    pub ssl_mode: SslMode,
    /// TLS only: PEM file of trusted roots (`ca=`); the built-in web roots
    /// otherwise.
    pub ca: Option<PathBuf>,
}

impl MysqlUrl {
    /// Takes a `mysql` or `mariadb` URL apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
        parts.expect_nothing_but(&["table", "mode", "ssl-mode", "ca"])?;
        let ssl_mode = match parts
            .param("ssl-mode")
            .unwrap_or("DISABLED")
            .to_ascii_uppercase()
            .as_str()
        {
            "DISABLED" => SslMode::Disabled,
            "REQUIRED" => SslMode::Required,
            "VERIFY_CA" => SslMode::VerifyCa,
            "VERIFY_IDENTITY" => SslMode::VerifyIdentity,
            other => {
                return Err(url_error(format!(
                    "ssl-mode {other:?} is not supported: use DISABLED, REQUIRED, VERIFY_CA or \
                     VERIFY_IDENTITY (lockward verifies the server's certificate in each TLS mode)"
                )))
            }
        };
        if parts.param("ca").is_some() && ssl_mode == SslMode::Disabled {
            return Err(url_error(
                "ca= needs ssl-mode=REQUIRED, VERIFY_CA or VERIFY_IDENTITY",
            ));
        }
        let user = parts
            .user
            .clone()
            .ok_or_else(|| url_error("mysql:// needs a user: mysql://USER@HOST/DB"))?;
        let db = percent_decode(parts.path.trim_matches('/'))?;
        if db.is_empty() {
            return Err(url_error("mysql:// needs a database: mysql://USER@HOST/DB"));
        }
        let mode = match parts.param("mode").unwrap_or("lease") {
            "lease" => MysqlMode::Lease,
            "named" => MysqlMode::Named,
            other => {
                return Err(url_error(format!(
                    "mode {other:?} is unknown; use mode=lease or mode=named"
                )))
            }
        };
        let table = parts
            .param("table")
            .unwrap_or(mode.default_table())
            .to_string();
        let plain = |c: char| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit();
        if table.is_empty()
            || table.len() > 40
            || !table.chars().all(plain)
            || table.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(url_error(format!(
                "table {table:?} must be a plain SQL name: lowercase letters, digits and _, at most 40"
            )));
        }
        Ok(MysqlUrl {
            endpoint: parts.single_endpoint(3306)?,
            user,
            password: parts.password.clone(),
            db,
            table,
            mode,
            ssl_mode,
            ca: parts.param("ca").map(PathBuf::from),
        })
    }
}

impl MysqlMode {
    /// The lock table when the URL names none.
    pub fn default_table(self) -> &'static str {
        match self {
            MysqlMode::Lease => DEFAULT_LEASE_TABLE,
            MysqlMode::Named => DEFAULT_NAMED_TABLE,
        }
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for MysqlUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("mysql://")?;
        write_auth(f, &Some(self.user.clone()), &self.password)?;
        write!(f, "{}/{}", self.endpoint, self.db)?;
        let mut params = Vec::new();
        if self.table != self.mode.default_table() {
            params.push(format!("table={}", self.table));
        }
        if self.mode == MysqlMode::Named {
            params.push("mode=named".to_string());
        }
        if self.ssl_mode != SslMode::Disabled {
            params.push(format!("ssl-mode={}", self.ssl_mode.as_str()));
        }
        if let Some(ca) = &self.ca {
            params.push(format!("ca={}", ca.display()));
        }
        if !params.is_empty() {
            write!(f, "?{}", params.join("&"))?;
        }
        Ok(())
    }
}
