//! MySQL's and MariaDB's core, below every seam file: a pool of
//! connections (passwords never in messages), the error mapping, the
//! tables, statements run with a time bound and retried when InnoDB picked
//! them as a deadlock's victim, and how names become parameters.

use std::time::Duration;

use mysql_async::prelude::{FromRow, Queryable};
use mysql_async::{OptsBuilder, Params, Pool, PoolConstraints, PoolOpts};

use super::url::{MysqlUrl, SslMode};
use crate::error::{Cause, Error, Result};
use crate::name::Name;

/// How long one statement (with getting a connection) may take: a server
/// that does not answer is reported as unavailable then.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The most connections one store keeps to the server.
const MAX_CONNECTIONS: usize = 64;

/// What a statement changed: the rows it touched and the value it gave
/// `LAST_INSERT_ID(expr)`.
#[derive(Debug, Clone, Copy)]
pub struct Changed {
    /// Rows changed (an upsert that updated counts 2, one that left the row
    /// as it was 0).
    pub rows: u64,
    /// The statement's `LAST_INSERT_ID`, if it set one.
    pub last_insert_id: Option<u64>,
}

/// The server of one URL, through a pool of connections.
pub struct Db {
    pool: Pool,
    address: String,
}

/// The driver's options for `url`; a `ca=` file that cannot be read is the
/// URL's fault.
pub(crate) fn options(url: &MysqlUrl) -> Result<OptsBuilder> {
    let pool = PoolOpts::default()
        .with_constraints(PoolConstraints::new(0, MAX_CONNECTIONS).expect("0 <= max"))
        // A reset per checkout is a round trip; nothing lockward does
        // leaves state in the session.
        .with_reset_connection(false);
    let builder = OptsBuilder::default()
        .ip_or_hostname(url.endpoint.host.clone())
        .tcp_port(url.endpoint.port)
        .user(Some(url.user.clone()))
        .pass(url.password.as_ref().map(|p| p.expose().to_string()))
        .db_name(Some(url.db.clone()))
        // Upserts tell taken from left alone by their count of changed rows.
        .client_found_rows(false)
        // Stay on the address given (a socket would bypass proxies).
        .prefer_socket(false)
        .tcp_nodelay(true)
        .pool_opts(pool);
    Ok(builder.ssl_opts(ssl_opts(url)?))
}

/// TLS as the URL asks: the chain always verified, the name too with
/// `VERIFY_IDENTITY`.
fn ssl_opts(url: &MysqlUrl) -> Result<Option<mysql_async::SslOpts>> {
    if url.ssl_mode == SslMode::Disabled {
        return Ok(None);
    }
    if !cfg!(feature = "mysql-tls") {
        return Err(Error::NotBuilt {
            scheme: "mysql".into(),
            why: "ssl-mode needs lockward's `mysql-tls` cargo feature".into(),
        });
    }
    #[cfg(feature = "mysql-tls")]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut tls = mysql_async::SslOpts::default()
        .with_danger_skip_domain_validation(url.ssl_mode != SslMode::VerifyIdentity);
    if let Some(ca) = &url.ca {
        let pem = crate::url_parts::read_file("CA", ca)?;
        tls = tls
            .with_root_certs(vec![pem.into()])
            .with_disable_built_in_roots(true);
    }
    Ok(Some(tls))
}

/// lockward's error for a driver error. The driver never prints passwords.
pub fn my_error(address: &str, e: &mysql_async::Error) -> Error {
    let denied = |message: String| Error::Denied {
        address: address.to_string(),
        message,
        cause: Some(Cause::of(e)),
    };
    let message = match e {
        mysql_async::Error::Server(s) if s.code == 1045 => {
            return denied(
                "authentication failed: check the user and password in the URL".to_string(),
            )
        }
        // No access to the database, or a statement the user may not run.
        mysql_async::Error::Server(s) if s.code == 1044 || s.code == 1142 => {
            return denied(format!("{} ({}): {}", s.code, s.state, s.message))
        }
        mysql_async::Error::Server(s) => format!("{} ({}): {}", s.code, s.state, s.message),
        other => other.to_string(),
    };
    Error::Unavailable {
        address: address.to_string(),
        message,
        cause: Some(Cause::of(e)),
    }
}

/// Whether InnoDB rolled the statement back to break a deadlock or a lock
/// wait (nothing was applied; it can run again).
fn rolled_back(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == 1213 || s.code == 1205)
}

impl Db {
    /// A pool on `url`'s server, checked with one connection.
    ///
    /// Cancellation: dropping the future drops the pool and its connection
    /// attempt.
    pub async fn connect(url: &MysqlUrl) -> Result<Db> {
        let db = Db {
            pool: Pool::new(options(url)?),
            address: url.to_string(),
        };
        db.rows::<u8>("SELECT 1", Params::Empty).await?;
        Ok(db)
    }

    /// The address for messages.
    pub fn address(&self) -> &str {
        &self.address
    }

    pub(super) fn timed_out(&self) -> Error {
        Error::Unavailable {
            address: self.address.clone(),
            message: format!("no answer within {STATEMENT_TIMEOUT:?}"),
            cause: None,
        }
    }

    /// Runs `sql` (a prepared statement, cached per connection) until it
    /// is not a deadlock's victim, within [`STATEMENT_TIMEOUT`] each.
    async fn run<T, F>(&self, f: impl Fn(mysql_async::Conn) -> F) -> Result<T>
    where
        F: std::future::Future<Output = mysql_async::Result<T>>,
    {
        let mut tries = 0;
        loop {
            let attempt = async {
                let conn = self.pool.get_conn().await?;
                f(conn).await
            };
            match tokio::time::timeout(STATEMENT_TIMEOUT, attempt).await {
                Err(_) => return Err(self.timed_out()),
                Ok(Err(e)) if rolled_back(&e) && tries < 5 => tries += 1,
                Ok(Err(e)) => return Err(my_error(&self.address, &e)),
                Ok(Ok(value)) => return Ok(value),
            }
        }
    }

    /// Runs a statement that returns no rows.
    ///
    /// Cancellation: the statement may or may not have run; its connection is
    /// dropped, not reused.
    pub async fn exec(&self, sql: &str, params: Params) -> Result<Changed> {
        self.run(|mut conn| {
            let params = params.clone();
            async move {
                conn.exec_drop(sql, params).await?;
                Ok(Changed {
                    rows: conn.affected_rows(),
                    last_insert_id: conn.last_insert_id(),
                })
            }
        })
        .await
    }

    /// Runs a query and decodes its rows.
    ///
    /// Cancellation: the query may or may not have run (it changes nothing);
    /// its connection is dropped.
    pub async fn rows<T: FromRow + Send + 'static>(
        &self,
        sql: &str,
        params: Params,
    ) -> Result<Vec<T>> {
        self.run(|mut conn| {
            let params = params.clone();
            async move { conn.exec(sql, params).await }
        })
        .await
    }

    /// A connection of its own, outside the pool (for a named lock, which
    /// belongs to the session that took it), within [`STATEMENT_TIMEOUT`].
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn session(&self, url: &MysqlUrl) -> Result<mysql_async::Conn> {
        let opened = tokio::time::timeout(STATEMENT_TIMEOUT, mysql_async::Conn::new(options(url)?));
        match opened.await {
            Err(_) => Err(self.timed_out()),
            Ok(Err(e)) => Err(my_error(&self.address, &e)),
            Ok(Ok(conn)) => Ok(conn),
        }
    }

    /// Runs statements without parameters, one after the other (plain text,
    /// not prepared: for the tables' definitions).
    ///
    /// Cancellation: the statements may have run in part; each is idempotent
    /// where lockward uses this.
    pub async fn batch(&self, sql: &str) -> Result<()> {
        self.run(|mut conn| async move { conn.query_drop(sql).await })
            .await
    }
}

/// Creates the lock table and the record tables if missing. Names compare
/// byte for byte (`VARBINARY`: no case folding, no trailing-space padding).
///
/// Cancellation: a table already created stays; the next connect finishes the
/// rest.
pub async fn create_tables(db: &Db, t: &str) -> Result<()> {
    db.batch(&format!(
        "CREATE TABLE IF NOT EXISTS {t} (
             name       VARBINARY(512) NOT NULL PRIMARY KEY,
             owner      VARCHAR(64) CHARACTER SET ascii NOT NULL,
             holder     TEXT CHARACTER SET utf8mb4 NULL,
             fence      BIGINT UNSIGNED NOT NULL,
             expires_at DATETIME(6) NOT NULL,
             session    BIGINT UNSIGNED NULL
         ) ENGINE=InnoDB;
         CREATE TABLE IF NOT EXISTS {t}_records (
             record_key   VARBINARY(512) NOT NULL PRIMARY KEY,
             record_value LONGTEXT CHARACTER SET utf8mb4 NOT NULL,
             expires_at   DATETIME(6) NOT NULL
         ) ENGINE=InnoDB;
         CREATE TABLE IF NOT EXISTS {t}_versioned (
             record_key   VARBINARY(512) NOT NULL PRIMARY KEY,
             record_value LONGTEXT CHARACTER SET utf8mb4 NOT NULL,
             version      BIGINT UNSIGNED NOT NULL,
             expires_at   DATETIME(6) NOT NULL
         ) ENGINE=InnoDB"
    ))
    .await
}

/// The next fence after the row's `fence` column, in SQL: `max(fence + 1,
/// the server's UTC clock in µs)`; [`CLOCK_US`] for a row being
/// inserted. The row alone is not enough: one that came back older than
/// the fences already granted (a replica promoted before it had the last
/// commits, a restore from a backup) would hand out those fences again;
/// the clock is ahead of them as long as the server's clock is not behind
/// the lost one's by more than the time from the last lost grant to this
/// one. Plain UTC arithmetic, so neither the session's time zone nor a
/// daylight-saving change moves it. Below 2^53 for centuries.
pub(super) const NEXT_FENCE: &str =
    "GREATEST(fence + 1, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)))";

/// The server's UTC clock in µs, in SQL: the first fence of a name that has
/// no row yet, and the floor of every versioned record's version.
pub(super) const CLOCK_US: &str =
    "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

/// `prefix` as a `LIKE` pattern that matches it literally, then anything.
pub(super) fn like_prefix(prefix: &str) -> Vec<u8> {
    let mut pattern = Vec::with_capacity(prefix.len() + 1);
    for b in prefix.bytes() {
        if matches!(b, b'|' | b'%' | b'_') {
            pattern.push(b'|');
        }
        pattern.push(b);
    }
    pattern.push(b'%');
    pattern
}

/// One parameter: the name's bytes.
pub(super) fn name_param(name: &Name) -> Params {
    Params::Positional(vec![name.as_str().as_bytes().into()])
}

#[cfg(test)]
mod tests {
    use super::like_prefix;

    #[test]
    fn a_prefix_matches_itself_literally() {
        assert_eq!(like_prefix("a_b%c|"), b"a|_b|%c||%".to_vec());
        assert_eq!(like_prefix(""), b"%".to_vec());
    }
}
