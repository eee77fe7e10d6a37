//! The etcd store: its client, and the lock seam in the layout of `concurrency.Mutex`.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use etcd_client::{Client, GetOptions, SortOrder, SortTarget};

use super::keys;
use crate::backend::{Attempt, Capabilities, Grant, Kind, LockBackend, PermitBackend, Request};
use crate::error::{Error, Result};
use crate::lease::LockInfo;
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

#[async_trait]
impl LockBackend for EtcdBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        self.address.clone()
    }

    fn permits(&self) -> Option<&dyn PermitBackend> {
        Some(self)
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        let entered = self.enter(req).await?;
        if !entered.holds(req.kind) {
            // Go's TryLock: leave the line at once (the drop revokes).
            return Ok(Attempt::Held { expires_in: None });
        }
        let contender = entered.contender;
        let fence = contender.revision as u64;
        let held = contender.keep(req.ttl);
        self.leases().insert((req.name.clone(), req.owner), held);
        Ok(Attempt::Granted { fence })
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        if req.kind == Kind::Reader {
            return self.acquire_read(req, deadline).await;
        }
        let prefix = keys::lock_prefix(&self.prefix, req.name);
        let contender = 'line: loop {
            let entered = self.enter(req).await?;
            let readers_before = entered.readers_before();
            let (mut contender, mut first) =
                (entered.contender, entered.first_writer.unwrap_or_default());
            if first == contender.revision && !readers_before {
                break contender;
            }
            if first == contender.revision {
                // First among the writers, after readers that came earlier.
                contender.keepalive = Some(self.keep_alive_while_waiting(&contender, req.ttl / 3));
                match self
                    .wait_out_readers(req.name, &contender, req.ttl, deadline)
                    .await?
                {
                    Some(true) => break contender,
                    Some(false) => continue 'line,
                    None => return Ok(None),
                }
            }
            contender.keepalive = Some(self.keep_alive_while_waiting(&contender, req.ttl / 3));
            loop {
                match self
                    .wait_for_predecessor(&prefix, contender.revision, deadline)
                    .await?
                {
                    Wait::TimedOut => return Ok(None),
                    // Keys only join a line behind us and leave it: once the
                    // first key is gone, none is left before ours, and ours
                    // still exists while its lease is within its TTL.
                    Wait::Deleted(revision)
                        if revision == first
                            && contender.lease_alive(req.ttl)
                            && !readers_before =>
                    {
                        break 'line contender
                    }
                    Wait::Deleted(_) | Wait::NoneBefore | Wait::Recheck => {}
                }
                let (place, now_first) = self.place(&prefix, contender.revision).await?;
                first = now_first;
                match place {
                    Place::First if !readers_before => break 'line contender,
                    Place::First => {
                        match self
                            .wait_out_readers(req.name, &contender, req.ttl, deadline)
                            .await?
                        {
                            Some(true) => break 'line contender,
                            Some(false) => continue 'line,
                            None => return Ok(None),
                        }
                    }
                    Place::Behind => {}
                    // Our lease lapsed while we waited (keep-alives failed):
                    // join the line again with a new one.
                    Place::Gone => continue 'line,
                }
            }
        };
        Ok(Some(self.take(req, contender)))
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let Some(held) = self.leases().get(&(name.clone(), owner)).cloned() else {
            return Err(not_owner());
        };
        // A keep-alive renews the lease to the TTL it was granted with; a
        // longer one would give the holder a deadline past the server's.
        if lease_seconds(ttl) > held.ttl_secs {
            return Err(Error::InvalidArgument {
                what: "ttl",
                why: format!(
                    "an etcd lease keeps the TTL it was granted with ({} s); take the lock with the longer TTL instead",
                    held.ttl_secs
                ),
            });
        }
        let alive = self.keep_alive_once(held.lease).await?;
        let key = held.key.clone();
        // Still on our lease: a forced unlock may have moved the key onto
        // a placeholder's (see `forced.rs`).
        let ours = alive
            && self
                .call(|mut c| {
                    let key = key.clone();
                    async move { c.get(key, None).await }
                })
                .await?
                .kvs()
                .first()
                .is_some_and(|kv| kv.lease() == held.lease);
        if ours {
            Ok(())
        } else {
            self.leases().remove(&(name.clone(), owner));
            Err(not_owner())
        }
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let Some(held) = self.leases().remove(&(name.clone(), owner)) else {
            return Err(Error::NotOwner {
                name: name.to_string(),
            });
        };
        if self.revoke(held.lease).await? {
            Ok(())
        } else {
            Err(Error::NotOwner {
                name: name.to_string(),
            })
        }
    }

    /// Revokes the holder's lease (see `forced.rs`).
    async fn force_release(&self, name: &Name, holder: &LockInfo) -> Result<()> {
        self.revoke_holder(name, holder).await
    }

    /// Moves the holder's key onto a placeholder lease (see `forced.rs`).
    async fn force_hold_back(
        &self,
        name: &Name,
        holder: &LockInfo,
        _placeholder: OwnerId,
        label: &str,
    ) -> Result<()> {
        self.move_to_placeholder(name, holder, label).await
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let prefix = keys::lock_prefix(&self.prefix, name);
        let opts = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend);
        let resp = self
            .call(|mut c| {
                let (key, opts) = (prefix.clone(), opts.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let Some(first) = resp.kvs().first() else {
            return Ok(None);
        };
        if self.readers_before(name, first.create_revision()).await? {
            // The first writer still waits for readers: they hold.
            return Ok(None);
        }
        let value = String::from_utf8_lossy(first.value()).into_owned();
        let lease = first.lease();
        // Our own holders are known by lease; others by what they stored.
        let ours = self
            .leases()
            .iter()
            .find(|(_, held)| held.lease == lease)
            .map(|((_, owner), _)| owner.to_string());
        let (owner, label) = match (ours, OwnerId::from_hex(&value)) {
            (Some(owner), None) => (owner, Some(value)),
            (Some(owner), Some(_)) => (owner, None),
            (None, Some(_)) => (value, None),
            (None, None) => (
                format!("lease {lease:x}"),
                Some(value).filter(|v| !v.is_empty()),
            ),
        };
        let ttl = self
            .call(|mut c| async move { c.lease_time_to_live(lease, None).await })
            .await
            .ok()
            .map(|r| r.ttl())
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs);
        Ok(Some(LockInfo {
            name: name.to_string(),
            owner: if owner.is_empty() {
                "(etcdctl)".into()
            } else {
                owner
            },
            holder: label,
            fence: u64::try_from(first.create_revision()).ok(),
            expires_in: ttl,
            waiters: Some(resp.kvs().len() - 1),
        }))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let range = format!("{}{}", self.prefix, keys::escape(prefix));
        let opts = GetOptions::new().with_prefix().with_keys_only();
        let resp = self
            .call(|mut c| {
                let (key, opts) = (range.clone(), opts.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let found: Vec<String> = resp
            .kvs()
            .iter()
            .filter_map(|kv| std::str::from_utf8(kv.key()).ok())
            .map(str::to_string)
            .collect();
        let names: Vec<Name> = found
            .iter()
            .filter_map(|k| keys::name_of(&self.prefix, k))
            .filter_map(|n| Name::new(n).ok())
            .collect();
        let mut held = crate::backend::inspect_each(self, names).await?;
        held.extend(self.list_readers(&found).await?);
        held.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(held)
    }
}
