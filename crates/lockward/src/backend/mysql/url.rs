//! The `mysql://` URL form (and `mariadb://`): the server, user, database
//! and lock table.

use std::fmt;

use crate::error::Result;
use crate::url_parts::{percent_decode, url_error, write_auth, Endpoint, Parts, Secret};

/// The lock table unless `table=` says otherwise.
pub const DEFAULT_TABLE: &str = "lockward_locks";

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
    /// The lock table (a plain SQL name), [`DEFAULT_TABLE`] by default; the
    /// record tables are named after it.
    pub table: String,
}

impl MysqlUrl {
    /// Takes a `mysql` or `mariadb` URL apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
        parts.expect_nothing_but(&["table", "mode"])?;
        let user = parts
            .user
            .clone()
            .ok_or_else(|| url_error("mysql:// needs a user: mysql://USER@HOST/DB"))?;
        let db = percent_decode(parts.path.trim_matches('/'))?;
        if db.is_empty() {
            return Err(url_error("mysql:// needs a database: mysql://USER@HOST/DB"));
        }
        match parts.param("mode").unwrap_or("lease") {
            "lease" => {}
            other => {
                return Err(url_error(format!(
                    "mode {other:?} is unknown; use mode=lease"
                )))
            }
        }
        let table = parts.param("table").unwrap_or(DEFAULT_TABLE).to_string();
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
        })
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for MysqlUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("mysql://")?;
        write_auth(f, &Some(self.user.clone()), &self.password)?;
        write!(f, "{}/{}", self.endpoint, self.db)?;
        if self.table != DEFAULT_TABLE {
            write!(f, "?table={}", self.table)?;
        }
        Ok(())
    }
}
