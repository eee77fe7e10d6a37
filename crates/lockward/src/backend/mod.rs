//! The backend trait every store implements, and the capabilities each
//! declares.
//!
//! A backend only knows names, owners and TTLs; leases, guards, renewal and
//! deadlines are built on top of it by [`Store`](crate::Store), so every
//! backend gets them the same way.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::error::Result;
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

#[cfg(feature = "etcd")]
pub mod etcd;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "redis")]
pub mod redlock;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

/// What a backend guarantees and how it behaves. Code and docs read these;
/// the conformance suite checks every claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Waiters acquire in the order they started waiting.
    pub fifo: bool,
    /// Waiters are woken by the store (notify, pub/sub, watch) rather than
    /// by polling.
    pub pushed_wakeups: bool,
    /// The store itself frees the lock when the holder's session or
    /// connection dies, before the TTL (ephemeral nodes, advisory locks).
    pub server_detects_loss: bool,
    /// Expiry is timed by the store's clock, not by the clients' hosts.
    pub server_clock: bool,
    /// The store frees a lock whose TTL passed without renewal. False for
    /// session locks (PostgreSQL advisory mode): those are held until the
    /// holder releases them or its session ends, so a paused holder keeps
    /// its lock (and nobody else can take it meanwhile).
    pub expires: bool,
    /// Fences and locks survive reopening the store (and, for servers, a
    /// restart with persistence).
    pub durable: bool,
    /// Separate processes can share locks.
    pub cross_process: bool,
    /// Separate hosts can share locks.
    pub cross_host: bool,
}

/// One acquisition request.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// What to lock.
    pub name: &'a Name,
    /// Who asks.
    pub owner: OwnerId,
    /// How long the store keeps the lock without renewal.
    pub ttl: Duration,
    /// Human label of the holder, stored where the backend can.
    pub label: Option<&'a str>,
}

/// The outcome of one non-waiting attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The lock is ours, with this fencing token.
    Granted {
        /// The fencing token.
        fence: u64,
    },
    /// Someone else holds it (or waiters queue ahead of us).
    Held {
        /// When the holder's lease runs out, if the store can tell: a waiter
        /// re-checks then, since an expiry pushes no notification.
        expires_in: Option<Duration>,
    },
}

/// A granted lock, as a waiting acquisition returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The fencing token.
    pub fence: u64,
    /// When the successful request started: the local deadline counts from
    /// here.
    pub started: Instant,
}

/// Notifications that a lock may have become free.
#[async_trait]
pub trait Wakeup: Send {
    /// Resolves at the next notification (possibly a spurious one).
    async fn changed(&mut self);

    /// Forgets notifications delivered so far. The waiter calls it right
    /// before each re-check, which covers them; later ones still wake it.
    /// This folds a burst (one release published on N masters) into one
    /// re-check.
    fn mark_seen(&mut self) {}
}

/// A subscription to a name's release notifications, taken *before* the
/// re-check so that a release between the two is never missed.
pub struct Subscription(Option<Box<dyn Wakeup>>);

impl Subscription {
    /// No notifications: the waiter polls with jittered backoff.
    pub fn polling() -> Self {
        Subscription(None)
    }

    /// Notifications pushed by the store.
    pub fn pushed(wakeup: impl Wakeup + 'static) -> Self {
        Subscription(Some(Box::new(wakeup)))
    }

    /// Whether notifications are pushed (else the caller must poll).
    pub fn is_pushed(&self) -> bool {
        self.0.is_some()
    }

    /// Forgets notifications delivered so far (see [`Wakeup::mark_seen`]).
    pub fn mark_seen(&mut self) {
        if let Some(w) = &mut self.0 {
            w.mark_seen();
        }
    }

    /// Waits for the next notification; never resolves when polling.
    pub async fn changed(&mut self) {
        match &mut self.0 {
            Some(w) => w.changed().await,
            None => std::future::pending().await,
        }
    }
}

/// A lock store. Implement this to add a backend; everything else
/// (guards, renewal, `with_lock`, recipes, the CLI) then works on it.
///
/// Every method is owner-checked and atomic on the store.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// What this backend guarantees.
    fn capabilities(&self) -> Capabilities;

    /// The store's address for messages, with any password redacted.
    fn address(&self) -> String;

    /// The longest TTL a lock may have here, when the store bounds it
    /// (ZooKeeper: the session timeout).
    fn max_ttl(&self) -> Option<Duration> {
        None
    }

    /// One attempt, without waiting.
    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt>;

    /// Subscribes to notifications for `name`. The default polls.
    async fn subscribe(&self, _name: &Name) -> Result<Subscription> {
        Ok(Subscription::polling())
    }

    /// Waits until the lock is granted or `deadline` passes (`Ok(None)`).
    /// Dropping the future cancels the wait and leaves nothing behind.
    ///
    /// The default subscribes, then re-checks with [`try_acquire`](Self::try_acquire)
    /// at each notification, at the holder's expiry, or by backoff when the
    /// backend cannot push. Queue-based backends (FIFO) override it.
    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        crate::wait::acquire_by_rechecking(self, req, deadline).await
    }

    /// Pushes the holder's expiry to now + `ttl`. [`Error::NotOwner`](crate::Error::NotOwner)
    /// when `owner` does not hold a live lease on `name`.
    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()>;

    /// Frees the lock. [`Error::NotOwner`](crate::Error::NotOwner) when
    /// `owner` does not hold a live lease on `name`.
    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()>;

    /// The current holder of `name`, if any.
    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>>;

    /// Every held lock whose name starts with `prefix`, sorted by name.
    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>>;

    /// Stores a record (for recipes: the cron ledger) unless `key` already
    /// has one; `true` when this call stored it. The record lives for `ttl`
    /// (etcd: between `ttl`/2 and `ttl`, see its docs). Record keys never
    /// collide with lock keys.
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool>;

    /// Stores or replaces the record of `key`.
    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()>;

    /// Every live record whose key starts with `prefix`, sorted by key.
    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>>;

    /// The versioned record of `key` (for optimistic updates and rate
    /// limits), unless it does not exist or its TTL passed. Versioned
    /// records are kept apart from plain records and locks.
    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>>;

    /// Writes the versioned record of `key` if its version is still
    /// `expected` (0: it does not exist or expired), to live for `ttl`.
    /// Returns the new version, or `None` when another write came first.
    /// Versions only grow, across expiry too, so a stale `expected` never
    /// matches a newer record.
    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>>;
}

/// A versioned record: its value and the version a conditional write must
/// name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The stored value.
    pub value: String,
    /// Its version, above 0.
    pub version: u64,
}

/// [`Error::NotOwner`](crate::Error::NotOwner) unless the owner-checked
/// statement or script changed exactly one lock.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "redis", feature = "postgres")),
    allow(dead_code)
)]
pub(crate) fn owner_checked(name: &Name, changed: u64) -> Result<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(crate::Error::NotOwner {
            name: name.to_string(),
        })
    }
}

/// For `list`: inspects each name found (once each, in order) and keeps the
/// ones held.
#[cfg_attr(not(any(feature = "redis", feature = "etcd")), allow(dead_code))]
pub(crate) async fn inspect_each<B: Backend + ?Sized>(
    backend: &B,
    mut names: Vec<Name>,
) -> Result<Vec<LockInfo>> {
    names.sort();
    names.dedup();
    let mut held = Vec::new();
    for name in names {
        if let Some(info) = backend.inspect(&name).await? {
            held.push(info);
        }
    }
    Ok(held)
}

impl std::fmt::Debug for dyn Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({})", self.address())
    }
}
