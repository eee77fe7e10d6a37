//! Guarded tables on PostgreSQL: install and remove the guard, claim a
//! lock's fence, and show what is guarded.
//!
//! Claim first, the trigger only checks: right after a holder acquires its
//! lock it claims the lock's fence ([`PostgresGuard::claim`]), which raises the
//! stored fence only upwards and waits for every open transaction that
//! wrote under the old fence; from then on a statement on a guarded table
//! goes on only when the session's fence is the stored one (a statement-
//! level trigger, so a holder's transactions never wait on each other).

use std::time::Duration;

use tokio_postgres::Client;

use super::sql::{SCHEMA, TRIGGER};
use crate::backend::postgres::core::{open, pg_error};
use crate::backend::postgres::url::PostgresUrl;
use crate::error::{Error, Result};
use crate::fence::claim_wait::{settled, timed_out, wait_halfway};
use crate::fence::db::{GuardedTable, StoredFence, Unfenced};
use crate::url::StoreUrl;

/// A connection to a PostgreSQL database whose tables are guarded.
pub struct PostgresGuard {
    client: Client,
    /// The server process of `client`, whose blockers a waiting claim
    /// looks up.
    pid: i32,
    url: PostgresUrl,
    address: String,
}

impl PostgresGuard {
    /// Connects to the database of a `postgres://` URL (the same form as
    /// the store's; its `table=` and `mode=` are ignored).
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &str) -> Result<PostgresGuard> {
        let url = match StoreUrl::parse(url)? {
            StoreUrl::Postgres(url) => url,
            other => {
                return Err(Error::invalid(
                    "fence database",
                    format!(
                    "{} is not a PostgreSQL URL; fences are enforced by PostgreSQL (postgres://)",
                    other.scheme()
                ),
                ))
            }
        };
        let address = url.to_string();
        let client = open(&url, &address, |_| {}, || {}).await?;
        let pid: i32 = client
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .map_err(|e| pg_error(&address, &e))?
            .get(0);
        Ok(PostgresGuard {
            client,
            pid,
            url,
            address,
        })
    }

    pub(super) fn fail(&self, e: &tokio_postgres::Error) -> Error {
        pg_error(&self.address, e)
    }

    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// Guards `tables` (and every partition of a partitioned one) by the
    /// fence of `lock`, in one transaction that waits at most 5 s for each
    /// table's lock; `claimer`, when given, is the one role besides the
    /// installer that may claim fences. Installing again replaces the
    /// guard (a table moves to another lock that way), and changes nothing
    /// else.
    ///
    /// Cancellation: dropping the future rolls the transaction back.
    pub async fn install(
        &mut self,
        tables: &[String],
        lock: &str,
        unfenced: Unfenced,
        claimer: Option<&str>,
    ) -> Result<Vec<String>> {
        crate::name::Name::new(lock)?;
        let tx = begin_schema_change(&mut self.client, &self.address).await?;
        let fail = |e: tokio_postgres::Error| pg_error(&self.address, &e);
        tx.batch_execute(SCHEMA).await.map_err(fail)?;
        if let Some(role) = claimer {
            let role = quote_ident(role);
            tx.batch_execute(&format!(
                "GRANT USAGE ON SCHEMA lockward TO {role}; \
                 GRANT EXECUTE ON FUNCTION lockward.claim(text, bigint) TO {role}"
            ))
            .await
            .map_err(fail)?;
        }
        let mut guarded = Vec::new();
        for table in tables {
            for each in resolve(&tx, table, &self.address).await? {
                tx.batch_execute(&format!(
                    "DROP TRIGGER IF EXISTS {TRIGGER} ON {each}; \
                     CREATE TRIGGER {TRIGGER} BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE \
                     ON {each} FOR EACH STATEMENT EXECUTE FUNCTION lockward.check_fence({}, {}, {})",
                    quote_literal(lock),
                    quote_literal(unfenced.as_str()),
                    quote_literal(&crate::fence::pairs::encode_name(lock)),
                ))
                .await
                .map_err(fail)?;
                guarded.push(each);
            }
        }
        tx.commit().await.map_err(fail)?;
        Ok(guarded)
    }

    /// Removes the guard from `tables` and their partitions; with `purge`,
    /// also lockward's schema (the stored fences) once no table is guarded.
    ///
    /// Cancellation: dropping the future rolls the transaction back.
    pub async fn uninstall(&mut self, tables: &[String], purge: bool) -> Result<Vec<String>> {
        let tx = begin_schema_change(&mut self.client, &self.address).await?;
        let fail = |e: tokio_postgres::Error| pg_error(&self.address, &e);
        let mut removed = Vec::new();
        for table in tables {
            for each in resolve(&tx, table, &self.address).await? {
                tx.batch_execute(&format!("DROP TRIGGER IF EXISTS {TRIGGER} ON {each}"))
                    .await
                    .map_err(fail)?;
                removed.push(each);
            }
        }
        if purge {
            let left: i64 = tx
                .query_one(
                    "SELECT count(*) FROM pg_trigger WHERE tgname = $1",
                    &[&TRIGGER],
                )
                .await
                .map_err(fail)?
                .get(0);
            if left > 0 {
                return Err(Error::invalid(
                    "purge",
                    format!("{left} other table(s) are still guarded; uninstall them too (see `lockward fence status`)"),
                ));
            }
            tx.batch_execute("DROP SCHEMA IF EXISTS lockward CASCADE")
                .await
                .map_err(fail)?;
        }
        tx.commit().await.map_err(fail)?;
        Ok(removed)
    }

    /// The guarded tables of this database.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn guarded(&self) -> Result<Vec<GuardedTable>> {
        let rows = self
            .client
            .query(
                "SELECT t.tgrelid::regclass::text, t.tgargs, t.tgenabled <> 'D' \
                 FROM pg_trigger t WHERE t.tgname = $1 ORDER BY 1",
                &[&TRIGGER],
            )
            .await
            .map_err(|e| self.fail(&e))?;
        Ok(rows
            .iter()
            .map(|row| {
                let args: Vec<u8> = row.get(1);
                let mut args = args.split(|b| *b == 0).map(String::from_utf8_lossy);
                let lock = args.next().unwrap_or_default().into_owned();
                let unfenced = match args.next().as_deref() {
                    Some("allow") => Unfenced::Allow,
                    _ => Unfenced::Refuse,
                };
                GuardedTable {
                    table: row.get(0),
                    lock,
                    unfenced,
                    enabled: row.get(2),
                }
            })
            .collect())
    }

    /// The stored fence of every lock claimed in this database (none when
    /// nothing was installed).
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn fences(&self) -> Result<Vec<StoredFence>> {
        let installed = self
            .client
            .query_one("SELECT to_regclass('lockward.fences') IS NOT NULL", &[])
            .await
            .map_err(|e| self.fail(&e))?;
        if !installed.get::<_, bool>(0) {
            return Ok(Vec::new());
        }
        let rows = self
            .client
            .query(
                "SELECT lock_name, fence, raised_at::text, raised_by FROM lockward.fences ORDER BY 1",
                &[],
            )
            .await
            .map_err(|e| self.fail(&e))?;
        Ok(rows
            .iter()
            .map(|row| StoredFence {
                lock: row.get(0),
                fence: row.get::<_, i64>(1).max(0) as u64,
                raised_at: row.get(2),
                raised_by: row.get(3),
            })
            .collect())
    }

    /// Claims `fence` for `lock`: the stored fence becomes `fence` unless
    /// it is larger already, once every open transaction that wrote under
    /// the old fence has ended (so all they committed comes before the
    /// claim). Waits at most `within` for them; then
    /// [`Error::TimedOut`], naming the sessions that held it up.
    /// [`Error::Stale`] when a larger fence was claimed already: this
    /// holder lost its lock.
    ///
    /// Cancellation: dropping the future cancels the claim on the server
    /// only when the connection drops; drop the `PostgresGuard` too.
    pub async fn claim(&self, lock: &str, fence: u64, within: Duration) -> Result<u64> {
        self.claim_as(lock, fence, within, false)
            .await
            .map(|(stored, _)| stored)
    }

    /// As [`claim`](Self::claim), but when the claim still waits halfway
    /// through `within`, the sessions that hold it up are ended
    /// (`pg_terminate_backend`: what they had not committed rolls back, and
    /// a paused holder's connection is gone when it wakes). Returns the
    /// stored fence and the sessions ended, described. Ending another
    /// role's session takes `pg_signal_backend` or a superuser; sessions it
    /// may not end keep the claim waiting until `within`.
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
        let mine = i64::try_from(fence).map_err(|_| {
            Error::invalid(
                "fence",
                format!("{fence} is larger than PostgreSQL's bigint"),
            )
        })?;
        self.client
            .batch_execute(&format!(
                "SET lock_timeout = '{}ms'",
                within.as_millis().clamp(1, i32::MAX as u128)
            ))
            .await
            .map_err(|e| self.fail(&e))?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&lock, &mine];
        let claim = self
            .client
            .query_one("SELECT lockward.claim($1, $2)", &params);
        let (answered, blockers) = wait_halfway(claim, within, || async {
            self.blockers(self.pid, end_stale).await.unwrap_or_default()
        })
        .await;
        let stored: i64 = match answered {
            Some(Ok(row)) => row.get(0),
            Some(Err(e)) if e.code().map(|c| c.code()) == Some("55P03") => {
                return Err(timed_out(lock, &self.address, within, &blockers))
            }
            Some(Err(e)) => return Err(self.fail(&e)),
            None => return Err(timed_out(lock, &self.address, within, &blockers)),
        };
        settled(lock, fence, stored.max(0) as u64, end_stale, blockers)
    }

    /// The sessions that block backend `pid`, described for a person;
    /// with `end`, each is ended too.
    async fn blockers(&self, pid: i32, end: bool) -> Result<Vec<String>> {
        let other = open(&self.url, &self.address, |_| {}, || {}).await?;
        let rows = other
            .query(
                "SELECT pid, usename::text, coalesce(application_name, ''), coalesce(state, ''), \
                        coalesce((now() - xact_start)::text, ''), \
                        CASE WHEN $2 THEN pg_terminate_backend(pid) ELSE false END \
                 FROM pg_stat_activity WHERE pid = ANY(pg_blocking_pids($1))",
                &[&pid, &end],
            )
            .await
            .map_err(|e| self.fail(&e))?;
        Ok(rows
            .iter()
            .map(|r| {
                let ended = if r.get::<_, bool>(5) { ", ended" } else { "" };
                format!(
                    "pid {} (user {}, application {:?}, {}, in its transaction for {}{ended})",
                    r.get::<_, i32>(0),
                    r.get::<_, String>(1),
                    r.get::<_, String>(2),
                    r.get::<_, String>(3),
                    r.get::<_, String>(4)
                )
            })
            .collect())
    }

    /// Sets the stored fence of `lock` to `fence`, also downwards: a
    /// repair, e.g. after the lock moved to a store whose fences are
    /// smaller. Writes under the old fence are refused from then on.
    ///
    /// Cancellation: one statement; dropping the future may or may not
    /// have applied it.
    pub async fn reset(&self, lock: &str, fence: u64) -> Result<()> {
        let fence = i64::try_from(fence).map_err(|_| {
            Error::invalid(
                "fence",
                format!("{fence} is larger than PostgreSQL's bigint"),
            )
        })?;
        self.client
            .execute(
                "INSERT INTO lockward.fences (lock_name, fence, raised_at, raised_by) \
                 VALUES ($1, $2, clock_timestamp(), session_user) \
                 ON CONFLICT (lock_name) DO UPDATE SET fence = excluded.fence, \
                 raised_at = excluded.raised_at, raised_by = excluded.raised_by",
                &[&lock, &fence],
            )
            .await
            .map_err(|e| self.fail(&e))?;
        Ok(())
    }
}

/// Begins the transaction of an install or uninstall: its waits bounded,
/// and one at a time in the database (two `CREATE OR REPLACE FUNCTION`s of
/// one function at once fail with "tuple concurrently updated").
async fn begin_schema_change<'a>(
    client: &'a mut Client,
    address: &str,
) -> Result<tokio_postgres::Transaction<'a>> {
    let fail = |e: tokio_postgres::Error| pg_error(address, &e);
    let tx = client.transaction().await.map_err(fail)?;
    tx.batch_execute(
        "SET LOCAL lock_timeout = '5s'; \
         SELECT pg_advisory_xact_lock(hashtext('lockward.fence.install'))",
    )
    .await
    .map_err(fail)?;
    Ok(tx)
}

/// `table` and, when it is partitioned, each of its partitions, as names
/// PostgreSQL quoted; an error naming it when there is no such table.
async fn resolve(
    tx: &tokio_postgres::Transaction<'_>,
    table: &str,
    address: &str,
) -> Result<Vec<String>> {
    let row = tx
        .query_one(
            "SELECT c.oid::regclass::text, c.relkind::text, c.oid \
             FROM (SELECT to_regclass($1) AS oid) r LEFT JOIN pg_class c ON c.oid = r.oid",
            &[&table],
        )
        .await
        .map_err(|e| pg_error(address, &e))?;
    let Some(name) = row.get::<_, Option<String>>(0) else {
        return Err(Error::invalid(
            "table",
            format!("{table:?}: no such table in this database"),
        ));
    };
    let kind: String = row.get(1);
    match kind.as_str() {
        "r" => Ok(vec![name]),
        "p" => {
            let oid: u32 = row.get(2);
            let parts = tx
                .query(
                    "SELECT relid::regclass::text FROM pg_partition_tree($1::oid) ORDER BY level, 1",
                    &[&oid],
                )
                .await
                .map_err(|e| pg_error(address, &e))?;
            Ok(parts.iter().map(|r| r.get(0)).collect())
        }
        _ => Err(Error::invalid(
            "table",
            format!("{table:?} is not a table (a view, an index, a sequence…)"),
        )),
    }
}

/// `text` as an SQL identifier.
fn quote_ident(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// `text` as an SQL string literal.
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
