//! `mode=named`: the server's named locks, `GET_LOCK`.
//!
//! Each held lock is a named lock on a connection of its own, keyed by
//! `lockward:` and a SHA-256 of `TABLE:NAME` (the server takes at most 64
//! characters). The server releases it when that connection ends: a
//! crashed holder frees its lock at once, with no TTL to wait out. The
//! fence comes from the lock table's row for the name, raised on the
//! holding connection once the lock is granted, so fences only grow and
//! survive restarts as in lease mode. Waiting is the server's own queue
//! (`GET_LOCK` with a timeout): nothing polls; a wait given up (timed out or
//! cancelled) ends its connection, so a grant that raced the give-up is
//! freed with it. Renewal is a round trip on the holding connection
//! (`IS_USED_LOCK` names the session that holds the lock); when it fails,
//! the session is gone, and `lost()` fires.
//!
//! Nothing frees a lock whose holder is alive but stuck: a holder paused
//! past its TTL keeps it (its local deadline still tells it to stop).
//!
//! Named locks belong to a server session, so they need one: through a
//! proxy that hands server connections to many clients between
//! statements (ProxySQL's multiplexing, for instance) the lock may be
//! taken on one server session and asked after on another. Connect
//! directly, or make sure the proxy pins a connection that took a named
//! lock to its client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params};

use super::core::{like_prefix, Db};
use super::sessions::Sessions;
use super::url::MysqlUrl;
use crate::backend::recheck::{wait_out_outage, Backoff, OUTAGE_MAX, OUTAGE_MIN};
use crate::backend::sessions::HeldSessions;
use crate::backend::{Attempt, Capabilities, Grant, LockBackend, Request};
use crate::error::{Error, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// Bound on a renewal's round trip on the holding connection.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest a single `GET_LOCK` waits when the caller waits forever (it
/// is asked again after).
const LONGEST_WAIT_S: u64 = 3600;

/// What MysqlNamedBackend guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: false,
    pushed_wakeups: true,
    server_detects_loss: true,
    server_clock: false,
    expires: false,
    durable: true,
    cross_process: true,
    cross_host: true,
    permanent_records: true,
    native_rw_lock: false,
    native_semaphore: false,
};

/// Named mode.
pub struct MysqlNamedBackend {
    db: Arc<Db>,
    records: super::records::Records,
    sessions: Sessions,
    table: String,
    /// The session holding each of this store's locks.
    held: HeldSessions<Conn>,
}

impl MysqlNamedBackend {
    /// Connects and creates the tables if needed.
    ///
    /// Cancellation: dropping the future gives up the connection; a table
    /// it created stays.
    pub async fn connect(url: &MysqlUrl) -> Result<Self> {
        let db = Arc::new(Db::connect(url).await?);
        super::core::create_tables(&db, &url.table).await?;
        Ok(MysqlNamedBackend {
            records: super::records::Records::new(db.clone(), &url.table),
            sessions: Sessions::new(url, db.clone()),
            db,
            table: url.table.clone(),
            held: HeldSessions::default(),
        })
    }

    /// `TABLE:NAME`, which the server hashes into the lock's key.
    fn key(&self, name: &Name) -> Vec<u8> {
        format!("{}:{}", self.table, name.as_str()).into_bytes()
    }

    fn error(&self, e: &mysql_async::Error) -> Error {
        super::core::my_error(self.db.address(), e)
    }

    /// With the lock held on `conn`: raises the name's fence and records
    /// the holder; keeps `conn` as the holding session.
    async fn record(&self, req: &Request<'_>, mut conn: Conn) -> Result<u64> {
        let t = &self.table;
        let (first, next) = (super::core::CLOCK_US, super::core::NEXT_FENCE);
        let sql = format!(
            "INSERT INTO {t} (name, owner, holder, fence, expires_at, session)
             VALUES (?, ?, ?, LAST_INSERT_ID({first}), '9999-12-31', CONNECTION_ID())
             ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID({next}), owner = VALUES(owner),
                 holder = VALUES(holder), expires_at = VALUES(expires_at), session = VALUES(session)"
        );
        let params = Params::Positional(vec![
            req.name.as_str().as_bytes().into(),
            req.owner.to_string().into(),
            req.label.into(),
        ]);
        if let Err(e) = conn.exec_drop(sql, params).await {
            // The lock goes with the session.
            drop(conn);
            return Err(self.error(&e));
        }
        let fence = match conn.last_insert_id() {
            Some(fence) if fence > 0 => fence,
            _ => {
                return Err(Error::Protocol {
                    address: self.db.address().to_string(),
                    message: "the fence was not returned".into(),
                    cause: None,
                })
            }
        };
        self.held.insert(req.name, req.owner, conn);
        Ok(fence)
    }

    /// One stay in the server's queue, on one session; `reached` is set
    /// once a new session answered (an idle one may have died idle: it is
    /// replaced without a word).
    async fn wait_in_queue(
        &self,
        req: &Request<'_>,
        deadline: Option<Instant>,
        reached: &mut bool,
    ) -> Result<Option<Grant>> {
        let (conn, mut reused) = self.sessions.take().await?;
        let mut waiting = self.sessions.waiting(conn);
        *reached |= !reused;
        let key = self.key(req.name);
        loop {
            let started = Instant::now();
            let left = deadline.map(|d| d.saturating_duration_since(started));
            if left.is_some_and(|l| l.is_zero()) {
                self.sessions.put_back(waiting.take());
                return Ok(None);
            }
            // Whole seconds on the server, the exact deadline here: a wait
            // cut short ends its session (see `Waiting`).
            let wait_s = left.map_or(LONGEST_WAIT_S, |l| l.as_secs_f64().ceil() as u64);
            let asked = self
                .sessions
                .get_lock_until(&mut waiting, &key, wait_s, deadline);
            let Some(got) = asked.await else {
                return Ok(None);
            };
            match got {
                Ok(true) => {
                    let fence = self.record(req, waiting.take()).await?;
                    // No server-side TTL: the local deadline counts from the grant.
                    return Ok(Some(Grant { fence, started }));
                }
                Ok(false) => {}
                Err(Error::Unavailable { .. }) if reused => {
                    // Dead: nothing to end. The next session is new.
                    waiting.replace(self.sessions.open().await?);
                    reused = false;
                    *reached = true;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[async_trait]
impl LockBackend for MysqlNamedBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        self.db.address().to_string()
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        let key = self.key(req.name);
        loop {
            let (conn, reused) = self.sessions.take().await?;
            let mut waiting = self.sessions.waiting(conn);
            let got = self.sessions.get_lock(waiting.conn(), &key, 0).await;
            let conn = waiting.take();
            return match got {
                Ok(true) => Ok(Attempt::Granted {
                    fence: self.record(req, conn).await?,
                }),
                Ok(false) => {
                    self.sessions.put_back(conn);
                    Ok(Attempt::Held { expires_in: None })
                }
                // An idle session that died: whatever it held went with it.
                Err(Error::Unavailable { .. }) if reused => continue,
                Err(e) => Err(e),
            };
        }
    }

    /// Waits in the server's queue; a server that drops while we wait (a
    /// restart) is waited out, up to the deadline, on a new session.
    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        let mut reached = false;
        let mut outage = Backoff::new(OUTAGE_MIN, OUTAGE_MAX);
        loop {
            match self.wait_in_queue(req, deadline, &mut reached).await {
                Err(e @ Error::Unavailable { .. }) if reached => {
                    if !wait_out_outage(req.name, &e, &mut outage, deadline).await {
                        return Ok(None);
                    }
                }
                other => return other,
            }
        }
    }

    async fn extend(&self, name: &Name, owner: OwnerId, _ttl: Duration) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let Some(mut conn) = self.held.remove(name, owner) else {
            return Err(not_owner());
        };
        let key = self.key(name);
        let asked = self.sessions.holds(&mut conn, &key);
        match tokio::time::timeout(PING_TIMEOUT, asked).await {
            Ok(Ok(true)) => {
                self.held.insert(name, owner, conn);
                Ok(())
            }
            // Answered, by a session that does not hold it.
            Ok(Ok(false)) => Err(not_owner()),
            // The session is gone, and the lock with it.
            Ok(Err(e)) if e.is_fatal() => Err(not_owner()),
            Ok(Err(e)) => {
                self.held.insert(name, owner, conn);
                Err(self.error(&e))
            }
            Err(_) => {
                // Unsure whether it still holds: dropping the session would
                // free a lock that may still be ours, so it is kept.
                self.held.insert(name, owner, conn);
                Err(Error::Unavailable {
                    address: self.db.address().to_string(),
                    message: format!("the holding session did not answer within {PING_TIMEOUT:?}"),
                    cause: None,
                })
            }
        }
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let Some(mut conn) = self.held.remove(name, owner) else {
            return Err(not_owner());
        };
        // The row first, while the lock still keeps the next holder out.
        let clear = format!(
            "UPDATE {} SET owner = '', holder = NULL, session = NULL, expires_at = '1970-01-01'
             WHERE name = ? AND owner = ?",
            self.table
        );
        let cleared = conn
            .exec_drop(
                clear,
                Params::Positional(vec![
                    name.as_str().as_bytes().into(),
                    owner.to_string().into(),
                ]),
            )
            .await;
        let released = match cleared {
            Ok(()) => self.sessions.release_lock(&mut conn, &self.key(name)).await,
            Err(e) => Err(e),
        };
        match released {
            Ok(true) => {
                self.sessions.put_back(conn);
                Ok(())
            }
            Ok(false) => Err(not_owner()),
            Err(e) if e.is_fatal() => Err(not_owner()),
            // Ending the session frees the lock whatever went wrong.
            Err(e) => Err(self.error(&e)),
        }
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let held = self.list(name.as_str()).await?;
        Ok(held.into_iter().find(|i| i.name == name.as_str()))
    }

    /// Rows whose session still holds the name's lock.
    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let t = &self.table;
        let held = Sessions::held_by_session_sql();
        let sql = format!(
            "SELECT name, owner, holder, fence FROM {t}
             WHERE name LIKE ? ESCAPE '|' AND owner <> '' AND {held}
             ORDER BY name"
        );
        let params = Params::Positional(vec![
            like_prefix(prefix).into(),
            format!("{t}:").into_bytes().into(),
        ]);
        let rows: Vec<(Vec<u8>, String, Option<String>, u64)> = self.db.rows(&sql, params).await?;
        Ok(rows
            .into_iter()
            .map(|(name, owner, label, fence)| LockInfo {
                name: String::from_utf8_lossy(&name).into_owned(),
                owner,
                label,
                fence: Some(fence),
                expires_in: None,
                waiters: None,
                holding: Holding::Lock,
            })
            .collect())
    }
}

super::records::delegate_records!(MysqlNamedBackend);
