//! Guarded tables on MySQL and MariaDB: install and remove the guard,
//! claim a lock's fence, and show what is guarded.
//!
//! As on PostgreSQL, claim first and the trigger only checks: the claim
//! raises the stored fence only upwards and waits for every open
//! transaction whose check holds the lock's fences row; a write goes on
//! only when the session's `@lockward_fences` carries the stored fence.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row};
use tokio::sync::Mutex;

use super::sql::{self, parse_trigger, quote_ident, Trigger, EVENTS, TABLE, TRIGGER_PREFIX};
use crate::backend::mysql::core::{my_error, options};
use crate::backend::mysql::url::MysqlUrl;
use crate::error::{Error, Result};
use crate::fence::claim_wait::{settled, timed_out, wait_halfway};
use crate::fence::db::{GuardedTable, StoredFence, Unfenced};
use crate::url::StoreUrl;

/// How long an install waits for a table's metadata lock (writers keep it
/// while their transactions run).
const DDL_WAIT_SECS: u32 = 5;

/// A connection to a MySQL or MariaDB database whose tables are guarded.
pub struct MysqlGuard {
    /// One connection of its own: a claim's wait and its connection id go
    /// together.
    conn: Mutex<Conn>,
    url: MysqlUrl,
    address: String,
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

    fn fail(&self, e: &mysql_async::Error) -> Error {
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

    /// Claims `fence` for `lock`: the stored fence becomes `fence` unless
    /// it is larger already, once every open transaction that wrote under
    /// the old fence has ended. Waits at most `within` for them; then
    /// [`Error::TimedOut`], naming the sessions that held it up (listing
    /// them takes the `PROCESS` privilege). [`Error::Stale`] when a larger
    /// fence was claimed already: this holder lost its lock.
    ///
    /// Cancellation: dropping the future leaves the claim running on the
    /// server until InnoDB's lock wait (`within`, rounded up to seconds)
    /// ends; drop the `MysqlGuard` too.
    pub async fn claim(&self, lock: &str, fence: u64, within: Duration) -> Result<u64> {
        self.claim_as(lock, fence, within, false)
            .await
            .map(|(stored, _)| stored)
    }

    /// As [`claim`](Self::claim), but when the claim still waits halfway
    /// through `within`, the sessions that hold it up are ended (`KILL
    /// CONNECTION`: what they had not committed rolls back). Returns the
    /// stored fence and the sessions ended, described. Ending another
    /// account's session takes `CONNECTION_ADMIN` (MySQL) or `SUPER`.
    ///
    /// Cancellation: as for [`claim`](Self::claim).
    pub async fn claim_ending_stale(
        &self,
        lock: &str,
        fence: u64,
        within: Duration,
    ) -> Result<(u64, Vec<String>)> {
        self.claim_as(lock, fence, within, true).await
    }

    async fn claim_as(
        &self,
        lock: &str,
        fence: u64,
        within: Duration,
        end_stale: bool,
    ) -> Result<(u64, Vec<String>)> {
        let mut conn = self.conn.lock().await;
        // InnoDB counts its lock wait in whole seconds; the client's own
        // bound below is the exact one.
        let seconds = within.as_secs_f64().ceil().clamp(1.0, 1_073_741_824.0) as u64;
        conn.query_drop(format!("SET SESSION innodb_lock_wait_timeout = {seconds}"))
            .await
            .map_err(|e| self.fail(&e))?;
        let id = conn.id();
        let claim =
            conn.exec_first::<u64, _, _>("CALL lockward_claim(?, ?)", (lock.as_bytes(), fence));
        let (answered, blockers) =
            wait_halfway(claim, within, || self.blockers(id, end_stale)).await;
        let stored = match answered {
            Some(Ok(Some(stored))) => stored,
            Some(Ok(None)) => {
                return Err(Error::invalid(
                    "fence database",
                    "lockward_claim returned no row; run `lockward fence install` again",
                ))
            }
            Some(Err(mysql_async::Error::Server(s))) if s.code == 1205 => {
                return Err(timed_out(lock, &self.address, within, &blockers))
            }
            Some(Err(e)) => return Err(self.fail(&e)),
            None => {
                // The claim still waits on the server: stop it, and start
                // the next claim on a fresh connection.
                if let Ok(mut other) = open(&self.url, &self.address).await {
                    let _ = other.query_drop(format!("KILL QUERY {id}")).await;
                }
                if let Ok(fresh) = open(&self.url, &self.address).await {
                    *conn = fresh;
                }
                return Err(timed_out(lock, &self.address, within, &blockers));
            }
        };
        settled(lock, fence, stored, end_stale, blockers)
    }

    /// The sessions whose transactions block connection `id`, described
    /// for a person; with `end`, each is ended too. InnoDB shows them only
    /// to an account with `PROCESS`; without it, the one entry says so.
    async fn blockers(&self, id: u32, end: bool) -> Vec<String> {
        let mut other = match open(&self.url, &self.address).await {
            Ok(other) => other,
            Err(e) => return vec![format!("(could not look: {e})")],
        };
        let rows: std::result::Result<Vec<Row>, _> = other
            .exec(
                "SELECT b.trx_mysql_thread_id, IFNULL(p.USER, ''), IFNULL(p.HOST, ''), \
                        IFNULL(p.COMMAND, ''), TIMESTAMPDIFF(SECOND, b.trx_started, NOW()) \
                 FROM information_schema.INNODB_LOCK_WAITS w \
                 JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id \
                 JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id \
                 LEFT JOIN information_schema.PROCESSLIST p ON p.ID = b.trx_mysql_thread_id \
                 WHERE r.trx_mysql_thread_id = ?",
                (id,),
            )
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(mysql_async::Error::Server(s)) if s.code == 1227 => {
                return vec![
                    "(lockward's account may not list them: grant it PROCESS to see who)".into(),
                ]
            }
            Err(e) => return vec![format!("(could not list them: {})", self.fail(&e))],
        };
        let mut out = Vec::new();
        for row in rows {
            let (pid, user, host, command, seconds): (u64, String, String, String, i64) =
                match mysql_async::from_row_opt(row) {
                    Ok(values) => values,
                    Err(_) => continue,
                };
            let ended = if end {
                match other.query_drop(format!("KILL CONNECTION {pid}")).await {
                    Ok(()) => ", ended".to_string(),
                    Err(e) => format!(", not ended: {}", self.fail(&e)),
                }
            } else {
                String::new()
            };
            out.push(format!(
                "connection {pid} (user {user}, from {host}, {command}, in its transaction for {seconds} s{ended})"
            ));
        }
        out
    }

    /// Sets the stored fence of `lock` to `fence`, also downwards: a
    /// repair, e.g. after the lock moved to a store whose fences are
    /// smaller. Writes under the old fence are refused from then on.
    ///
    /// Cancellation: one statement; dropping the future may or may not
    /// have applied it.
    pub async fn reset(&self, lock: &str, fence: u64) -> Result<()> {
        let mut conn = self.conn.lock().await;
        conn.exec_drop(
            "INSERT INTO lockward_fences (lock_name, fence, raised_at, raised_by) \
             VALUES (?, ?, SYSDATE(6), SESSION_USER()) \
             ON DUPLICATE KEY UPDATE fence = VALUES(fence), raised_at = VALUES(raised_at), \
             raised_by = VALUES(raised_by)",
            (lock.as_bytes(), fence),
        )
        .await
        .map_err(|e| self.fail(&e))
    }
}

/// A connection of lockward's own to `url`'s database.
async fn open(url: &MysqlUrl, address: &str) -> Result<Conn> {
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
