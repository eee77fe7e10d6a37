//! MySQL's lease mode: one row per name, kept across holders, and the lock
//! seam on it.
//!
//! **Taking a lock is one statement**, an upsert:
//! `INSERT … ON DUPLICATE KEY UPDATE col = IF(expires_at <= UTC_TIMESTAMP(6), new, col)`.
//! Why it is correct under InnoDB's locking:
//!
//! - The insert of a name that has no row takes it. Two inserts
//!   of one new name serialise on the primary key: the second waits for
//!   the first to commit, meets the duplicate, and runs the update on the
//!   row as the first committed it.
//! - The update runs with the row locked exclusively (the duplicate key is
//!   locked before `ON DUPLICATE KEY UPDATE` reads it), so the expiry test
//!   and the new values are one atomic step: of two contenders for an
//!   expired row, the second sees the first's fresh expiry and changes
//!   nothing.
//! - Assignments run left to right and each sees the ones before it. The
//!   first, `owner`, makes the decision; the others ask "is the owner now
//!   ours, and was the row free" (`expires_at`, assigned last, is still the
//!   old holder's then), so the decision is made once.
//! - While waiters take turns (see `baton.rs`), a free row goes to
//!   the waiter holding the baton, not to whoever asks first: the test
//!   asks that the baton be free or held by this session. The row records
//!   the session that took it with the baton (`session`), so that an
//!   expired row whose stuck holder still keeps the baton goes to the next
//!   caller at once; a row free for longer than `BARGE_AFTER` goes to
//!   anyone, so a baton kept by a stuck waiter cannot keep the lock from
//!   everyone.
//! - `UTC_TIMESTAMP(6)` is the statement's start on the server's clock: a
//!   statement that waited for the row lock judges expiry a little early
//!   (never late), and the new expiry counts from no earlier than when the
//!   client sent it, so the client's local deadline is never past it.
//!   UTC, so no daylight-saving jump moves it.
//! - The fence grows in the row (`LAST_INSERT_ID(max(fence + 1, clock))`,
//!   see [`NEXT_FENCE`](super::core::NEXT_FENCE), which the server returns
//!   with the count of changed rows: 1 inserted, 2 taken over, 0 held). The
//!   row outlives release and expiry, so a name's fences only grow, InnoDB
//!   keeps them across a restart, and the clock keeps them growing when a
//!   replica or a backup brings back an older row.
//!
//! Release and extend are owner-checked updates of the live row. Waiters
//! take turns through a baton the server hands on (see `baton.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params};

use super::baton::TryRow;
use super::core::{self, like_prefix, name_param, Db};
use super::url::MysqlUrl;
use crate::backend::time::{from_micros, micros};
use crate::backend::{Attempt, Capabilities, Grant, LockBackend, Request};
use crate::error::Result;
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// How long a row must have been free before it goes to a caller that
/// does not hold the baton while someone does.
pub(super) const BARGE_AFTER: Duration = Duration::from_secs(1);

/// The statements of lease mode, for one table.
struct Sql {
    acquire: String,
    remaining: String,
    extend: String,
    release: String,
    hold_back: String,
    inspect: String,
    list: String,
}

impl Sql {
    fn new(t: &str) -> Sql {
        let now = "UTC_TIMESTAMP(6)";
        let key = super::sessions::KEY;
        let barge = BARGE_AFTER.as_micros();
        // Free, and ours to take: nobody holds the baton, or this session
        // does, or the expired holder does (it took the row with it and is
        // stuck), or the row has been free long enough.
        let ours = format!(
            "expires_at <= {now}
                 AND (COALESCE(IS_USED_LOCK({key}), CONNECTION_ID()) IN (CONNECTION_ID(), IFNULL(session, 0))
                      OR expires_at <= {now} - INTERVAL {barge} MICROSECOND)"
        );
        // After `owner` was assigned: whether this statement took the row.
        let took = format!("owner = VALUES(owner) AND expires_at <= {now}");
        let left = format!("TIMESTAMPDIFF(MICROSECOND, {now}, expires_at)");
        let columns = format!("name, owner, holder, fence, {left}");
        let (first, next) = (core::CLOCK_US, core::NEXT_FENCE);
        Sql {
            acquire: format!(
                "INSERT INTO {t} (name, owner, holder, fence, expires_at)
                 VALUES (?, ?, ?, LAST_INSERT_ID({first}), {now} + INTERVAL ? MICROSECOND)
                 ON DUPLICATE KEY UPDATE
                     owner = IF({ours}, VALUES(owner), owner),
                     fence = IF({took}, LAST_INSERT_ID({next}), fence),
                     holder = IF({took}, VALUES(holder), holder),
                     session = IF({took}, IF(IS_USED_LOCK({key}) = CONNECTION_ID(), CONNECTION_ID(), NULL), session),
                     expires_at = IF({took}, VALUES(expires_at), expires_at)"
            ),
            remaining: format!("SELECT {left} FROM {t} WHERE name = ? AND expires_at > {now}"),
            extend: format!(
                "UPDATE {t} SET expires_at = {now} + INTERVAL ? MICROSECOND
                 WHERE name = ? AND owner = ? AND expires_at > {now}"
            ),
            // The row stays, with its fence: the next holder's is larger.
            // Free from now (for BARGE_AFTER).
            release: format!(
                "UPDATE {t} SET owner = '', holder = NULL, session = NULL, expires_at = {now}
                 WHERE name = ? AND owner = ? AND expires_at > {now}"
            ),
            // A forced unlock of a holder with a lock-delay: the row passes
            // to a placeholder nobody renews, expiry, fence and session
            // unchanged.
            hold_back: format!(
                "UPDATE {t} SET owner = ?, holder = ? WHERE name = ? AND owner = ? AND expires_at > {now}"
            ),
            inspect: format!("SELECT {columns} FROM {t} WHERE name = ? AND expires_at > {now}"),
            list: format!(
                "SELECT {columns} FROM {t}
                 WHERE name LIKE ? ESCAPE '|' AND expires_at > {now} ORDER BY name"
            ),
        }
    }
}

/// A row of the lock table as `inspect` and `list` read it.
type Row = (Vec<u8>, String, Option<String>, u64, i64);

fn info((name, owner, label, fence, left): Row) -> LockInfo {
    LockInfo {
        name: String::from_utf8_lossy(&name).into_owned(),
        owner,
        label,
        fence: Some(fence),
        expires_in: Some(from_micros(left)),
        waiters: None,
        holding: Holding::Lock,
    }
}

/// What the lease mode guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: false,
    pushed_wakeups: false,
    server_detects_loss: false,
    server_clock: true,
    expires: true,
    durable: true,
    cross_process: true,
    cross_host: true,
    permanent_records: true,
    native_rw_lock: false,
    native_semaphore: false,
};

/// Lease mode.
pub struct MysqlLeaseBackend {
    db: Arc<Db>,
    records: super::records::Records,
    batons: super::baton::Batons,
    sql: Sql,
}

impl MysqlLeaseBackend {
    /// Connects and creates the tables if needed.
    ///
    /// Cancellation: dropping the future closes the connection attempt; a
    /// table it created stays.
    pub async fn connect(url: &MysqlUrl) -> Result<Self> {
        let db = Arc::new(Db::connect(url).await?);
        core::create_tables(&db, &url.table).await?;
        Ok(MysqlLeaseBackend {
            records: super::records::Records::new(db.clone(), &url.table),
            batons: super::baton::Batons::new(
                super::sessions::Sessions::new(url, db.clone()),
                &url.table,
            ),
            db,
            sql: Sql::new(&url.table),
        })
    }
}

#[async_trait]
impl TryRow for MysqlLeaseBackend {
    /// One try at the row of `req`, on the pool or on `session` (the
    /// baton holder's: the baton then counts as this caller's).
    async fn try_row(&self, req: &Request<'_>, session: Option<&mut Conn>) -> Result<Attempt> {
        let params = Params::Positional(vec![
            req.name.as_str().as_bytes().into(),
            req.owner.to_string().into(),
            req.label.into(),
            micros(req.ttl).into(),
            self.batons.key(req.name).into(),
            self.batons.key(req.name).into(),
        ]);
        let changed = match session {
            None => self.db.exec(&self.sql.acquire, params).await?,
            Some(conn) => {
                let ran = conn.exec_drop(&self.sql.acquire, params);
                match tokio::time::timeout(core::STATEMENT_TIMEOUT, ran).await {
                    Ok(Ok(())) => core::Changed {
                        rows: conn.affected_rows(),
                        last_insert_id: conn.last_insert_id(),
                    },
                    Ok(Err(e)) => return Err(core::my_error(self.db.address(), &e)),
                    Err(_) => return Err(self.db.timed_out()),
                }
            }
        };
        // Inserted (1) or taken over (2): the server returns the fence the
        // statement gave `LAST_INSERT_ID(…)`.
        match (changed.rows, changed.last_insert_id) {
            (1 | 2, Some(fence)) if fence > 0 => return Ok(Attempt::Granted { fence }),
            (1 | 2, _) => {
                return Err(crate::error::Error::Protocol {
                    address: self.db.address().to_string(),
                    message: "the server took the lock but did not return its fence".into(),
                    cause: None,
                })
            }
            _ => {}
        }
        let left: Vec<i64> = self
            .db
            .rows(&self.sql.remaining, name_param(req.name))
            .await?;
        Ok(Attempt::Held {
            expires_in: left.first().map(|us| from_micros(*us)),
        })
    }
}

#[async_trait]
impl LockBackend for MysqlLeaseBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        self.db.address().to_string()
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        self.try_row(req, None).await
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        if let Some(over) =
            crate::backend::recheck::first_attempt(self.try_acquire(req), deadline).await?
        {
            return Ok(over);
        }
        self.batons.wait(self, req, deadline).await
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let params = Params::Positional(vec![
            micros(ttl).into(),
            name.as_str().as_bytes().into(),
            owner.to_string().into(),
        ]);
        let changed = self.db.exec(&self.sql.extend, params).await?;
        crate::backend::owner_checked(name, changed.rows)
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let params = Params::Positional(vec![
            name.as_str().as_bytes().into(),
            owner.to_string().into(),
        ]);
        let changed = self.db.exec(&self.sql.release, params).await;
        // After the row, so that the next waiter finds it free.
        self.batons.pass(name, owner).await;
        crate::backend::owner_checked(name, changed?.rows)
    }

    async fn force_hold_back(
        &self,
        name: &Name,
        holder: &LockInfo,
        placeholder: OwnerId,
        label: &str,
    ) -> Result<()> {
        let params = Params::Positional(vec![
            placeholder.to_string().into(),
            label.into(),
            name.as_str().as_bytes().into(),
            holder.owner.as_str().into(),
        ]);
        let changed = self.db.exec(&self.sql.hold_back, params).await?;
        crate::backend::owner_checked(name, changed.rows)
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let rows: Vec<Row> = self.db.rows(&self.sql.inspect, name_param(name)).await?;
        Ok(rows.into_iter().next().map(info))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let params = Params::Positional(vec![like_prefix(prefix).into()]);
        let rows: Vec<Row> = self.db.rows(&self.sql.list, params).await?;
        Ok(rows.into_iter().map(info).collect())
    }
}

super::records::delegate_records!(MysqlLeaseBackend);
