//! The ZooKeeper store's core, below every seam file: the backend type, the
//! locks and semaphore holds it keeps, its timing constants and what it
//! guarantees.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zookeeper_client as zk;
use zookeeper_client::Acls;

use super::paths;
use super::session::{unavailable, Session};
use super::url::ZookeeperUrl;
use crate::backend::Capabilities;
use crate::error::{Error, Result};
use crate::name::Name;
use crate::owner::OwnerId;

/// Bound on each request, retries of a dropped connection included.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause before re-sending a request whose connection was lost.
pub(super) const RETRY_PAUSE: Duration = Duration::from_millis(20);
/// How long a node we no longer want is retried for deletion.
pub(super) const ABANDON_LIMIT: Duration = Duration::from_secs(600);
/// A waiter re-checks at least this often even while its watch is quiet.
pub(super) const WATCH_SAFETY_NET: Duration = Duration::from_secs(2);

/// A request's answer from the server.
pub(super) type ZkResult<T> = std::result::Result<T, zk::Error>;

/// The locks this store holds, by name and owner.
pub(super) type Locks = Arc<Mutex<HashMap<(Name, OwnerId), Held>>>;

/// The ZooKeeper backend.
pub struct ZookeeperBackend {
    pub(super) address: String,
    pub(super) root: String,
    pub(super) acls: Acls<'static>,
    pub(super) session: Arc<Session>,
    /// The node of each lock this store holds.
    pub(super) held: Locks,
    /// The lease nodes of each semaphore holder this store has.
    pub(super) lease_holds: LeaseHolds,
    /// The runtime the session runs on: TTL timers and clean-ups run there
    /// too, so they keep time even when the caller's runtime is stalled.
    pub(super) runtime: tokio::runtime::Handle,
}

/// A lock this store holds.
pub(super) struct Held {
    /// Our node's full path.
    pub(super) path: String,
    /// The session epoch the lock was confirmed in.
    pub(super) epoch: u64,
    /// The label it was taken with, kept in the node's data.
    pub(super) label: Option<String>,
    /// When our own timer deletes the node unless renewed.
    pub(super) expiry: Arc<Mutex<Instant>>,
    pub(super) timer: tokio::task::JoinHandle<()>,
}

/// A contender node that is deleted unless we end up holding it.
pub(super) struct Contender<'a> {
    pub(super) backend: &'a ZookeeperBackend,
    pub(super) lock: String,
    /// The node's name (a child of `lock`).
    pub(super) node: String,
    pub(super) fence: u64,
    pub(super) kept: bool,
}

impl Contender<'_> {
    pub(super) fn path(&self) -> String {
        format!("{}/{}", self.lock, self.node)
    }
}

impl Drop for Contender<'_> {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        self.backend.abandon(self.path());
    }
}

/// The local clock, in ms since the epoch (records' expiry).
pub(super) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl ZookeeperBackend {
    /// Connects to the ensemble of `url`.
    ///
    /// Cancellation: dropping the future closes the session being opened.
    pub async fn connect(url: &ZookeeperUrl) -> Result<Self> {
        let address = url.to_string();
        let session = Arc::new(Session::connect(url, address.clone()).await?);
        let backend = ZookeeperBackend {
            address,
            root: paths::root(&url.chroot),
            acls: super::session::acls(url),
            session,
            held: Arc::new(Mutex::new(HashMap::new())),
            lease_holds: Arc::default(),
            runtime: tokio::runtime::Handle::current(),
        };
        // A round trip now, so bad credentials or a missing quorum fail
        // here, clearly.
        let root = backend.root.clone();
        match backend.ask(true, |c| c.check_stat(&root)).await? {
            Ok(_) => Ok(backend),
            Err(e) => Err(unavailable(&backend.address, &e)),
        }
    }

    /// The session timeout the server granted: the longest TTL a lock may
    /// have on this store.
    pub fn session_timeout(&self) -> Duration {
        self.session.timeout()
    }

    pub(super) fn held(&self) -> std::sync::MutexGuard<'_, HashMap<(Name, OwnerId), Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refuses a TTL longer than the session: the server could then free
    /// the lock (at session expiry) before the holder's deadline.
    pub(super) fn check_ttl(&self, ttl: Duration) -> Result<()> {
        let session = self.session.timeout();
        if ttl > session {
            return Err(Error::InvalidArgument {
                what: "ttl",
                why: format!(
                    "a ZooKeeper lock cannot outlive its session: the TTL {ttl:?} is longer than \
                     the session timeout {session:?}; lower the TTL or raise session_timeout= in \
                     the URL (the server caps it at its maxSessionTimeout)"
                ),
            });
        }
        Ok(())
    }
}

/// What ZookeeperBackend guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: true,
    pushed_wakeups: true,
    server_detects_loss: true,
    // The TTL is timed by the holder's host; the session by the
    // server.
    server_clock: false,
    expires: true,
    durable: true,
    cross_process: true,
    cross_host: true,
    permanent_records: false,
    native_rw_lock: true,
    native_semaphore: true,
};

/// The semaphore holders this store has, by semaphore and owner.
pub(super) type LeaseHolds = Arc<Mutex<HashMap<(Name, OwnerId), LeaseHeld>>>;

/// One holder's lease nodes.
pub(super) struct LeaseHeld {
    pub(super) nodes: Vec<String>,
    pub(super) epoch: u64,
    pub(super) label: Option<String>,
    pub(super) expiry: Arc<Mutex<Instant>>,
    pub(super) timer: tokio::task::JoinHandle<()>,
}
