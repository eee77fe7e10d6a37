//! What a backend declares it guarantees: the capabilities the conformance
//! suite checks and code and docs read.

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
    /// Records can be kept forever (permanent idempotency results): only
    /// on durable stores whose records live on disk, not in memory.
    pub permanent_records: bool,
    /// Read-write locks are native: a read or a write is one step of the
    /// store's (ZooKeeper in Curator's `InterProcessReadWriteLock` layout,
    /// which other clients share; PostgreSQL advisory mode's shared locks;
    /// Redis's readers' set beside the lock key; etcd's reader keys beside
    /// the writers' line). Elsewhere
    /// [`RwLock`](crate::recipe::RwLock) is built on a lock and a semaphore.
    pub native_rw_lock: bool,
    /// Semaphores are kept by the store, an entry per holder and a count
    /// beside them ([`PermitBackend`](super::PermitBackend)), so a permit
    /// costs the same however many hold one; elsewhere
    /// [`Semaphore`](crate::recipe::Semaphore) keeps a ledger record of at
    /// most [`MAX_HOLDERS`](crate::recipe::MAX_HOLDERS) holders.
    pub native_semaphore: bool,
}

impl Capabilities {
    /// Whether a lock-delay ([`LockOptions::lock_delay`](crate::LockOptions::lock_delay))
    /// can be enforced: the store frees locks by time, not the moment a
    /// holder's session ends.
    pub const fn lock_delay(&self) -> bool {
        self.expires && !self.server_detects_loss
    }

    /// Whether an operator can end a holder's lease from elsewhere
    /// ([`Store::force_unlock`](crate::Store::force_unlock)): only where the
    /// store keeps leases, not where a lock lives in its holder's session
    /// (PostgreSQL advisory mode).
    pub const fn force_unlock(&self) -> bool {
        self.expires
    }
}
