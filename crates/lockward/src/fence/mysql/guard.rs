//! Guarded tables on MySQL and MariaDB: connect, install and remove the
//! guard, and show what is guarded (the claim is in `claim.rs`).
//!
//! As on PostgreSQL, claim first and the trigger only checks: the claim
//! raises the stored fence only upwards and waits for every open
//! transaction whose check holds the lock's fences row; a write goes on
//! only when the session's `@lockward_fences` carries the stored fence.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params};
use tokio::sync::Mutex;

use super::sql::{self, parse_trigger, quote_ident, Trigger, EVENTS, TABLE, TRIGGER_PREFIX};
use crate::backend::mysql::core::{my_error, options};
use crate::backend::mysql::url::MysqlUrl;
use crate::error::{Error, Result};
use crate::fence::db::{GuardedTable, StoredFence, Unfenced};
use crate::url::StoreUrl;

/// How long an install waits for a table's metadata lock (writers keep it
/// while their transactions run).
const DDL_WAIT_SECS: u32 = 5;

/// A connection to a MySQL or MariaDB database whose tables are guarded.
pub struct MysqlGuard {
    /// One connection of its own: a claim's wait and its connection id go
    /// together.
    pub(super) conn: Mutex<Conn>,
    pub(super) url: MysqlUrl,
    pub(super) address: String,
    mariadb: bool,
}

impl MysqlGuard {
    /// Connects to the database of a `mysql://` URL (the same form as the
    /// store's; its `table=` and `mode=` are ignored).
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &str) -> Result<MysqlGuard> {
        let StoreUrl::Mysql(url) = StoreUrl::parse(url)? else {
            return Err(Error::invalid(
                "fence database",
                "not a MySQL URL; use mysql:// (or mariadb://)",
            ));
        };
        let address = url.to_string();
        let mut conn = open(&url, &address).await?;
        let version: String = conn
            .query_first("SELECT VERSION()")
            .await
            .map_err(|e| my_error(&address, &e))?
            .unwrap_or_default();
        Ok(MysqlGuard {
            conn: Mutex::new(conn),
            mariadb: version.contains("MariaDB"),
            url,
            address,
        })
    }

    pub(super) fn fail(&self, e: &mysql_async::Error) -> Error {
        my_error(&self.address, e)
    }

    /// The server's version, for the doctor.
    pub(super) async fn version(&self) -> Result<String> {
        let mut conn = self.conn.lock().await;
        let version: Option<String> = conn
            .query_first("SELECT VERSION()")
            .await
            .map_err(|e| self.fail(&e))?;
        Ok(version.unwrap_or_default())
    }

    /// Runs `sql` and decodes its rows, on the guard's connection.
    pub(super) async fn rows<T: mysql_async::prelude::FromRow + Send + 'static>(
        &self,
        sql: &str,
        params: impl Into<Params> + Send,
    ) -> Result<Vec<T>> {
        let mut conn = self.conn.lock().await;
        conn.exec(sql, params).await.map_err(|e| self.fail(&e))
    }

    /// Guards `tables` by the fence of `lock`: three row triggers on each
    /// (insert, update, delete); `claimer`, when given, is the one account
    /// (`user` or `user@host`) besides the installer that may claim fences.
    /// Installs run one at a time per server; each waits at most 5 s for a
    /// table's metadata lock. Installing again replaces the triggers (a
    /// table moves to another lock that way) and changes nothing else.
    ///
    /// Cancellation: the triggers are replaced one statement at a time;
    /// a dropped call may have guarded some of the tables.
    pub async fn install(
        &mut self,
        tables: &[String],
        lock: &str,
        unfenced: Unfenced,
        claimer: Option<&str>,
    ) -> Result<Vec<String>> {
        crate::name::Name::new(lock)?;
        let mut conn = self.conn.lock().await;
        let address = self.address.clone();
        let fail = |e: mysql_async::Error| my_error(&address, &e);
        let mut resolved = Vec::new();
        for table in tables {
            resolved.push(resolve(&mut conn, table, &self.address).await?);
        }
        serialise(&mut conn, &self.address).await?;
        let installed = async {
            conn.query_drop(TABLE).await.map_err(fail)?;
            for statement in sql::routines(self.mariadb) {
                conn.query_drop(statement).await.map_err(fail)?;
            }
            if let Some(account) = claimer {
                conn.query_drop(format!(
                    "GRANT EXECUTE ON PROCEDURE {}.lockward_claim TO {}",
                    quote_ident(&self.url.db),
                    quote_account(account)
                ))
                .await
                .map_err(fail)?;
            }
            let mut guarded = Vec::new();
            for (schema, table) in &resolved {
                let trigger = Trigger {
                    routines_db: &self.url.db,
                    schema,
                    table,
                    lock,
                    unfenced: unfenced.as_str(),
                };
                for event in EVENTS {
                    if !self.mariadb {
                        conn.query_drop(format!(
                            "DROP TRIGGER IF EXISTS {}.{}",
                            quote_ident(schema),
                            quote_ident(&trigger.name(event))
                        ))
                        .await
                        .map_err(fail)?;
                    }
                    conn.query_drop(trigger.create(event, self.mariadb))
                        .await
                        .map_err(fail)?;
                }
                guarded.push(format!("{schema}.{table}"));
            }
            Ok::<_, Error>(guarded)
        }
        .await;
        let _ = conn
            .query_drop("DO RELEASE_LOCK('lockward.fence.install')")
            .await;
        installed
    }

    /// Removes the guard from `tables`; with `purge`, also the stored
    /// fences and lockward's routines, once no table is guarded.
    ///
    /// Cancellation: the triggers are dropped one statement at a time.
    pub async fn uninstall(&mut self, tables: &[String], purge: bool) -> Result<Vec<String>> {
        let mut resolved = Vec::new();
        {
            let mut conn = self.conn.lock().await;
            for table in tables {
                resolved.push(resolve(&mut conn, table, &self.address).await?);
            }
        }
        let mut conn = self.conn.lock().await;
        serialise(&mut conn, &self.address).await?;
        let removed = async {
            let mut removed = Vec::new();
            for (schema, table) in &resolved {
                let trigger = Trigger {
                    routines_db: &self.url.db,
                    schema,
                    table,
                    lock: "",
                    unfenced: "",
                };
                for event in EVENTS {
                    conn.query_drop(format!(
                        "DROP TRIGGER IF EXISTS {}.{}",
                        quote_ident(schema),
                        quote_ident(&trigger.name(event))
                    ))
                    .await
                    .map_err(|e| self.fail(&e))?;
                }
                removed.push(format!("{schema}.{table}"));
            }
            if purge {
                let left: Vec<(String, String)> = conn
                    .exec(
                        "SELECT DISTINCT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE \
                         FROM information_schema.TRIGGERS WHERE TRIGGER_NAME LIKE ?",
                        (format!("{TRIGGER_PREFIX}%"),),
                    )
                    .await
                    .map_err(|e| self.fail(&e))?;
                if !left.is_empty() {
                    return Err(Error::invalid(
                        "purge",
                        format!("{} other table(s) are still guarded; uninstall them too (see `lockward fence status`)", left.len()),
                    ));
                }
                for statement in [
                    "DROP PROCEDURE IF EXISTS lockward_claim",
                    "DROP PROCEDURE IF EXISTS lockward_check",
                    "DROP TABLE IF EXISTS lockward_fences",
                ] {
                    conn.query_drop(statement)
                        .await
                        .map_err(|e| self.fail(&e))?;
                }
            }
            Ok(removed)
        }
        .await;
        let _ = conn
            .query_drop("DO RELEASE_LOCK('lockward.fence.install')")
            .await;
        removed
    }

    /// The guarded tables this account can see.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn guarded(&self) -> Result<Vec<GuardedTable>> {
        let rows: Vec<(String, String, String, String)> = self
            .rows(
                "SELECT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, EVENT_MANIPULATION, ACTION_STATEMENT \
                 FROM information_schema.TRIGGERS WHERE TRIGGER_NAME LIKE ? \
                 ORDER BY 1, 2, 3",
                (format!("{TRIGGER_PREFIX}%"),),
            )
            .await?;
        let mut out: Vec<(GuardedTable, usize)> = Vec::new();
        for (schema, table, _event, statement) in rows {
            let Some((lock, unfenced)) = parse_trigger(&statement) else {
                continue;
            };
            let name = format!("{schema}.{table}");
            match out.last_mut() {
                Some((last, events)) if last.table == name => *events += 1,
                _ => out.push((
                    GuardedTable {
                        table: name,
                        lock,
                        unfenced: match unfenced.as_str() {
                            "allow" => Unfenced::Allow,
                            _ => Unfenced::Refuse,
                        },
                        enabled: true,
                    },
                    1,
                )),
            }
        }
        // A table missing one of its three triggers lets that kind of
        // write around the guard.
        Ok(out
            .into_iter()
            .map(|(mut table, events)| {
                table.enabled = events == EVENTS.len();
                table
            })
            .collect())
    }

    /// The stored fence of every lock claimed in this database (none when
    /// nothing was installed).
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn fences(&self) -> Result<Vec<StoredFence>> {
        let installed: Vec<u8> = self
            .rows(
                "SELECT 1 FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'lockward_fences'",
                (),
            )
            .await?;
        if installed.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(Vec<u8>, u64, String, String)> = self
            .rows(
                "SELECT lock_name, fence, CAST(raised_at AS CHAR), raised_by \
                 FROM lockward_fences ORDER BY 1",
                (),
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|(lock, fence, raised_at, raised_by)| StoredFence {
                lock: String::from_utf8_lossy(&lock).into_owned(),
                fence,
                raised_at,
                raised_by,
            })
            .collect())
    }
}

/// A connection of lockward's own to `url`'s database.
pub(super) async fn open(url: &MysqlUrl, address: &str) -> Result<Conn> {
    let opts = options(url)?;
    match tokio::time::timeout(
        crate::backend::mysql::core::STATEMENT_TIMEOUT,
        Conn::new(opts),
    )
    .await
    {
        Err(_) => Err(Error::Unavailable {
            address: address.to_string(),
            message: "no answer within 5s".into(),
            cause: None,
        }),
        Ok(Err(e)) => Err(my_error(address, &e)),
        Ok(Ok(conn)) => Ok(conn),
    }
}

/// One install or uninstall at a time on the server, and waits for a
/// table's metadata lock bounded.
async fn serialise(conn: &mut Conn, address: &str) -> Result<()> {
    let fail = |e: mysql_async::Error| my_error(address, &e);
    conn.query_drop(format!("SET SESSION lock_wait_timeout = {DDL_WAIT_SECS}"))
        .await
        .map_err(fail)?;
    let got: Option<Option<i64>> = conn
        .query_first(format!(
            "SELECT GET_LOCK('lockward.fence.install', {DDL_WAIT_SECS})"
        ))
        .await
        .map_err(fail)?;
    match got.flatten() {
        Some(1) => Ok(()),
        _ => Err(Error::TimedOut {
            name: "another lockward fence install or uninstall on this server".into(),
            waited: Duration::from_secs(DDL_WAIT_SECS.into()),
        }),
    }
}

/// `table` (`name` or `schema.name`, backquotes allowed) as its schema and
/// name; an error naming it when there is no such base table.
async fn resolve(conn: &mut Conn, table: &str, address: &str) -> Result<(String, String)> {
    let unquote = |part: &str| part.trim().trim_matches('`').replace("``", "`");
    let (schema, name) = match table.split_once('.') {
        Some((schema, name)) => (Some(unquote(schema)), unquote(name)),
        None => (None, unquote(table)),
    };
    let found: Option<(String, String, String)> = conn
        .exec_first(
            "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = IFNULL(?, DATABASE()) AND TABLE_NAME = ?",
            (schema, name),
        )
        .await
        .map_err(|e| my_error(address, &e))?;
    match found {
        Some((schema, name, kind)) if kind == "BASE TABLE" => Ok((schema, name)),
        Some(_) => Err(Error::invalid(
            "table",
            format!("{table:?} is not a table (a view or a system table)"),
        )),
        None => Err(Error::invalid(
            "table",
            format!("{table:?}: no such table in this database"),
        )),
    }
}

/// An account as MySQL writes it: `user` (any host) or `user@host`, either
/// part quoted or not.
fn quote_account(account: &str) -> String {
    let (user, host) = match account.rsplit_once('@') {
        Some((user, host)) => (user, host),
        None => (account, "%"),
    };
    let part = |text: &str| {
        let text = text
            .trim()
            .trim_matches(|c| c == '\'' || c == '`' || c == '"');
        format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
    };
    format!("{}@{}", part(user), part(host))
}
