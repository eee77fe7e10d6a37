//! Claiming a lock's fence on MySQL and MariaDB: the claim's bounded wait
//! for the old holder's open transactions, the sessions that hold it up
//! (named, or ended), and the repair that sets a fence outright.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Row;

use super::guard::{open, MysqlGuard};
use crate::error::{Error, Result};
use crate::fence::claim_wait::{settled, timed_out, wait_halfway};

impl MysqlGuard {
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
