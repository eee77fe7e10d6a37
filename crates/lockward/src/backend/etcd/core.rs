//! The etcd store's core, below every seam file: the backend type, its
//! clients, the holds it keeps, the contender keys of the line and what it
//! guarantees.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::Client;

use crate::backend::{Capabilities, Request};
use crate::error::{Error, Result};
use crate::name::Name;
use crate::owner::OwnerId;

/// Bound on each unary call (a paused or partitioned member).
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// A waiter re-checks at least this often even while its watch is quiet,
/// in case the watch's member died (the delete would then never arrive).
pub(super) const WATCH_SAFETY_NET: Duration = Duration::from_secs(1);
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The etcd backend.
pub struct EtcdBackend {
    pub(super) address: String,
    pub(super) prefix: String,
    /// One client per member; `current` is the one in use.
    pub(super) clients: Vec<Client>,
    pub(super) current: AtomicUsize,
    /// The lease of each lock this store holds: only the holder knows it.
    pub(super) leases: Mutex<HashMap<(Name, OwnerId), Held>>,
}

#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) lease: i64,
    pub(super) key: String,
    /// The TTL the lease was granted with: a keep-alive renews to it.
    pub(super) ttl_secs: i64,
}

/// The value of a contender key: the label (an election proposal) when
/// there is one, else the owner id. A holder with a lock-delay stores its
/// owner id, label or not: the id's mark tells a forced unlock from
/// elsewhere to hold the name back.
pub(super) fn contender_value(req: &Request<'_>) -> String {
    match req.label {
        Some(label) if !req.owner.has_lock_delay() => label.to_string(),
        _ => req.owner.to_string(),
    }
}

/// A contender key whose lease must be revoked unless we end up holding it:
/// revoked on drop (a cancelled or timed-out wait), kept by `keep()`.
pub(super) struct Contender<'a> {
    pub(super) backend: &'a EtcdBackend,
    pub(super) lease: i64,
    pub(super) key: String,
    pub(super) revision: i64,
    /// When the lease's TTL last started counting: its grant, or the send
    /// time of the last keep-alive the server acknowledged.
    pub(super) refreshed: Arc<Mutex<Instant>>,
    pub(super) keepalive: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Contender<'_> {
    fn drop(&mut self) {
        if let Some(task) = self.keepalive.take() {
            task.abort();
        }
        if self.lease != 0 {
            let mut client = self.backend.client();
            let lease = self.lease;
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = client.lease_revoke(lease).await;
                });
            }
        }
    }
}

impl Contender<'_> {
    /// Whether the lease is surely alive: within `ttl` of its last refresh.
    pub(super) fn lease_alive(&self, ttl: Duration) -> bool {
        let refreshed = *self.refreshed.lock().unwrap_or_else(|p| p.into_inner());
        Instant::now() < refreshed + ttl
    }

    /// We hold the lock: stop the waiting keep-alive, keep the lease.
    pub(super) fn keep(mut self, ttl: Duration) -> Held {
        if let Some(task) = self.keepalive.take() {
            task.abort();
        }
        let held = Held {
            lease: self.lease,
            key: std::mem::take(&mut self.key),
            ttl_secs: lease_seconds(ttl),
        };
        self.lease = 0;
        held
    }
}

/// How a wait for the predecessor ended.
pub(super) enum Wait {
    /// The key of this create revision, just before ours, was deleted.
    Deleted(i64),
    /// No key before ours.
    NoneBefore,
    /// Look again (safety net, broken or cancelled watch).
    Recheck,
    /// The caller's deadline passed.
    TimedOut,
}

/// A contender's standing in its line.
pub(super) enum Place {
    First,
    Behind,
    Gone,
}

/// etcd counts lease TTLs in whole seconds.
pub(super) fn lease_seconds(ttl: Duration) -> i64 {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(secs.max(1)).unwrap_or(i64::MAX)
}

impl EtcdBackend {
    pub(super) fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<(Name, OwnerId), Held>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new lease of ⌈`ttl`⌉ seconds.
    pub(super) async fn grant(&self, ttl: Duration) -> Result<i64> {
        let secs = lease_seconds(ttl);
        Ok(self
            .call(|mut c| async move { c.lease_grant(secs, None).await })
            .await?
            .id())
    }

    pub(super) fn protocol(&self, message: &str) -> Error {
        Error::Protocol {
            address: self.address.clone(),
            message: message.to_string(),
            cause: None,
        }
    }
}

/// What EtcdBackend guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: true,
    pushed_wakeups: true,
    server_detects_loss: false,
    server_clock: true,
    expires: true,
    durable: true,
    cross_process: true,
    cross_host: true,
    permanent_records: false,
    native_rw_lock: true,
    native_semaphore: true,
};
