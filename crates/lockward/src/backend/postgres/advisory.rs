//! `mode=advisory`: PostgreSQL session advisory locks.
//!
//! Each held lock is a session advisory lock on a connection of its own,
//! keyed by `hashtextextended('<table>:<name>', 0)`. The server releases it
//! when that connection drops, as ZooKeeper drops an ephemeral node: a
//! crashed holder frees its lock at once, with no TTL to wait out. The
//! fence is drawn in the same statement after the lock is granted: the
//! largest of the row's last + 1, the table's sequence and the server's
//! clock in µs, so a standby or a backup that brought back older rows does
//! not hand out their fences again (readers granted in one microsecond may
//! share one: they hold together). Waiting is the server's own lock queue
//! (`pg_advisory_lock`, bounded by `statement_timeout`): nothing polls.
//! Renewal is a round trip on the holding connection; when it fails, the
//! session (and the lock with it) is gone, and `lost()` fires. A row per
//! held lock (with the holder's backend pid) makes `status` possible.
//!
//! Read-write locks are native: a reader takes the same key with
//! `pg_advisory_lock_shared`, a writer (and a plain lock) with
//! `pg_advisory_lock`. The server's lock manager queues a request that
//! conflicts with a *waiting* one behind it, so a waiting writer keeps out
//! the readers that come after it. A reader's row is named
//! `NAME#reader/OWNER`, so that `status` shows each reader.
//!
//! Nothing frees a lock whose holder is alive but stuck: a holder paused
//! past its TTL keeps it (and its local deadline still tells it to stop).
//!
//! Advisory locks belong to a server session, so they do not survive a
//! pooler that hands one session to many clients: behind PgBouncer in
//! transaction mode, the lock is taken on whichever server connection ran
//! that transaction and may be released or kept by another client's
//! traffic. Connect directly, or through a session-mode pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::core;
use super::records::RecordTables;
use super::sessions::{Session, Sessions, Waiting};
use super::url::PostgresUrl;
use crate::backend::sessions::HeldSessions;
use crate::backend::{Attempt, Capabilities, Grant, Kind, LockBackend, Request};
use crate::error::{Error, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// Bound on a renewal's round trip on the holding connection.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// Advisory mode.
pub struct PostgresAdvisoryBackend {
    address: String,
    shared: core::Shared,
    table: String,
    /// The connection holding each of this store's locks.
    held: HeldSessions<SessionHold>,
    sessions: Sessions,
}

/// What ends the name of an advisory lock function for a shared hold
/// (`pg_advisory_lock_shared`, `pg_advisory_unlock_shared`, …).
fn shared_suffix(shared: bool) -> &'static str {
    if shared {
        "_shared"
    } else {
        ""
    }
}

/// The session holding one lock, and whether its hold is shared (a
/// reader's).
type SessionHold = (Arc<Session>, bool);

impl PostgresAdvisoryBackend {
    /// Connects and creates the bookkeeping table if needed.
    ///
    /// Cancellation: dropping the future drops the connection attempt; a table
    /// it created stays.
    pub async fn connect(url: &PostgresUrl) -> Result<Self> {
        let address = url.to_string();
        let client = core::open(url, &address, |_| {}, || {}).await?;
        core::create_schema(&client, &url.table, &address).await?;
        Ok(PostgresAdvisoryBackend {
            shared: core::Shared::new(url.clone(), address.clone(), client),
            table: url.table.clone(),
            sessions: Sessions::new(url, &address),
            address,
            held: HeldSessions::default(),
        })
    }

    fn lock_key(&self, name: &Name) -> String {
        format!("{}:{}", self.table, name.as_str())
    }

    /// The statement that takes the lock (waiting for it when `wait`;
    /// shared when `shared`), draws the fence after the grant, and records
    /// the holder as row `$2`, in one round trip. Returns the fence, or no
    /// row when a try found the lock held.
    fn take_sql(&self, wait: bool, shared: bool) -> String {
        let t = &self.table;
        let clock = super::clock::CLOCK_FENCE;
        let mode = shared_suffix(shared);
        let lock = if wait {
            // The subquery in FROM runs first: the fence is drawn once held.
            format!("FROM (SELECT pg_advisory_lock{mode}(hashtextextended($1, 0))) held")
        } else {
            format!("WHERE pg_try_advisory_lock{mode}(hashtextextended($1, 0))")
        };
        format!(
            "WITH got AS (SELECT greatest(nextval('{t}_fence'), {clock}) AS fence {lock})
             INSERT INTO {t} AS l (name, owner, holder, fence, expires_at, pid)
             SELECT $2, $3, $4, fence, 'infinity', pg_backend_pid() FROM got
             ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, holder = excluded.holder,
                 fence = greatest(l.fence + 1, excluded.fence), expires_at = excluded.expires_at, pid = excluded.pid
             RETURNING fence"
        )
    }

    fn record(&self, req: &Request<'_>, client: Session, fence: i64) -> u64 {
        self.held.insert(
            req.name,
            req.owner,
            (Arc::new(client), req.kind == Kind::Reader),
        );
        u64::try_from(fence).unwrap_or(0)
    }

    /// The row that records a hold: the name, or `NAME#reader/OWNER` for
    /// a reader (many readers hold one name).
    fn row_name(name: &Name, owner: OwnerId, shared: bool) -> String {
        if shared {
            format!("{name}#reader/{owner}")
        } else {
            name.to_string()
        }
    }

    /// What the hold recorded as `row` (a [`row_name`](Self::row_name)) is.
    fn held_by(row: &str) -> Holding {
        match row.rsplit_once("#reader/") {
            Some((lock, owner)) if OwnerId::from_hex(owner).is_some() => Holding::Reader {
                lock: lock.to_string(),
            },
            _ => Holding::Lock,
        }
    }
}

/// What PostgresAdvisoryBackend guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: true,
    pushed_wakeups: true,
    server_detects_loss: true,
    server_clock: false,
    expires: false,
    durable: true,
    cross_process: true,
    cross_host: true,
    permanent_records: true,
    native_rw_lock: true,
    native_semaphore: false,
};

#[async_trait]
impl LockBackend for PostgresAdvisoryBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        self.address.clone()
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        let client = self.sessions.take().await?;
        let shared = req.kind == Kind::Reader;
        let sql = self.take_sql(false, shared);
        let key = self.lock_key(req.name);
        let owner = req.owner.to_string();
        let row_name = Self::row_name(req.name, req.owner, shared);
        let row = client
            .query(&sql, &[&key, &row_name, &owner, &req.label])
            .await
            .map(|rows| rows.into_iter().next())
            .map_err(|e| core::pg_error(&self.address, &e))?;
        match row {
            Some(row) => {
                let fence = self.record(req, client, row.get(0));
                Ok(Attempt::Granted { fence })
            }
            None => {
                self.sessions.put_back(client);
                Ok(Attempt::Held { expires_in: None })
            }
        }
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        let started = Instant::now();
        let waiting = Waiting::new(self.sessions.take().await?);
        let client = waiting.client();
        let timeout_ms = deadline.map_or(0, |d| {
            d.saturating_duration_since(started).as_millis().max(1)
        });
        client
            .batch_execute(&format!("SET statement_timeout = {timeout_ms}"))
            .await
            .map_err(|e| core::pg_error(&self.address, &e))?;
        let shared = req.kind == Kind::Reader;
        let sql = self.take_sql(true, shared);
        let key = self.lock_key(req.name);
        let owner = req.owner.to_string();
        let row_name = Self::row_name(req.name, req.owner, shared);
        let taken = client
            .query(&sql, &[&key, &row_name, &owner, &req.label])
            .await
            .map(|rows| rows.into_iter().next());
        let granted_at = Instant::now();
        let client = waiting.take();
        match taken {
            Ok(Some(row)) => {
                client
                    .batch_execute("RESET statement_timeout")
                    .await
                    .map_err(|e| core::pg_error(&self.address, &e))?;
                let fence = self.record(req, client, row.get(0));
                Ok(Some(Grant {
                    fence,
                    // The lock has no server-side TTL; the local deadline
                    // counts from the grant.
                    started: granted_at,
                }))
            }
            Ok(None) => Err(Error::Protocol {
                address: self.address.clone(),
                message: "pg_advisory_lock returned without the lock".into(),
                cause: None,
            }),
            // 57014: statement_timeout, our deadline.
            Err(e) if e.code().is_some_and(|c| c.code() == "57014") => Ok(None),
            Err(e) => Err(core::pg_error(&self.address, &e)),
        }
    }

    async fn extend(&self, name: &Name, owner: OwnerId, _ttl: Duration) -> Result<()> {
        let Some((client, _)) = self.held.get(name, owner) else {
            return Err(Error::NotOwner {
                name: name.to_string(),
            });
        };
        // The session holds the lock for as long as it lives.
        match tokio::time::timeout(PING_TIMEOUT, client.simple_query("SELECT 1")).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) if client.is_closed() => {
                self.held.remove(name, owner);
                Err(Error::NotOwner {
                    name: name.to_string(),
                })
            }
            Ok(Err(e)) => Err(core::pg_error(&self.address, &e)),
            Err(_) => Err(Error::Unavailable {
                address: self.address.clone(),
                message: format!("the holding session did not answer within {PING_TIMEOUT:?}"),
                cause: None,
            }),
        }
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let Some((client, shared)) = self.held.remove(name, owner) else {
            return Err(not_owner());
        };
        let key = self.lock_key(name);
        let sql = format!(
            "WITH gone AS (DELETE FROM {} WHERE name = $2 AND owner = $3)
             SELECT pg_advisory_unlock{}(hashtextextended($1, 0))",
            self.table,
            shared_suffix(shared)
        );
        let row_name = Self::row_name(name, owner, shared);
        let unlocked = client
            .query(&sql, &[&key, &row_name, &owner.to_string()])
            .await
            .map(|rows| rows.first().is_some_and(|r| r.get::<_, bool>(0)));
        match unlocked {
            Ok(true) => {
                if let Ok(client) = Arc::try_unwrap(client) {
                    self.sessions.put_back(client);
                }
                Ok(())
            }
            Ok(false) => Err(not_owner()),
            Err(_) if client.is_closed() => Err(not_owner()),
            Err(e) => Err(core::pg_error(&self.address, &e)),
        }
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let held = self.list(name.as_str()).await?;
        Ok(held.into_iter().find(|i| i.name == name.as_str()))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        // A row counts while its session still holds an advisory lock.
        let sql = format!(
            "SELECT name, owner, holder, fence FROM {} l
             WHERE starts_with(name, $1) AND EXISTS (
                 SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.pid = l.pid AND k.granted)
             ORDER BY name",
            self.table
        );
        let rows = self.shared.query(&sql, &[&prefix]).await?;
        Ok(rows
            .iter()
            .map(|r| {
                let name: String = r.get(0);
                LockInfo {
                    holding: Self::held_by(&name),
                    name,
                    owner: r.get(1),
                    label: r.get(2),
                    fence: u64::try_from(r.get::<_, i64>(3)).ok(),
                    expires_in: None,
                    waiters: None,
                }
            })
            .collect())
    }
}

impl RecordTables for PostgresAdvisoryBackend {
    fn shared(&self) -> &core::Shared {
        &self.shared
    }

    fn table(&self) -> &str {
        &self.table
    }
}
