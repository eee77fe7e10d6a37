//! `memory://`: locks shared by the threads and tasks of one process.
//!
//! Waiters queue per name and are served first come, first served: the
//! holder's release (or its expiry) wakes only the head of the queue, which
//! takes the lock itself. A try that finds waiters queued is refused, so
//! nobody jumps the queue. Fence counters live as long as the store.

pub(crate) mod doctor;
mod records;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::Notify;

use crate::backend::{Attempt, Capabilities, Grant, LockBackend, Request};
use crate::error::{Error, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// The in-process backend. Clone the [`Store`](crate::Store) to share it.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    slots: Mutex<HashMap<Name, Slot>>,
    records: Mutex<std::collections::BTreeMap<String, (String, Instant)>>,
    /// Versioned records: value, version, expiry. Expired entries stay, so
    /// their version keeps counting.
    versioned: Mutex<HashMap<String, (String, u64, Instant)>>,
}

#[derive(Debug, Default)]
struct Slot {
    fence: u64,
    holder: Option<Holder>,
    queue: VecDeque<Waiter>,
    next_waiter: u64,
}

#[derive(Debug)]
struct Holder {
    owner: OwnerId,
    expires_at: Instant,
    label: Option<String>,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    wake: Arc<Notify>,
}

impl Slot {
    fn live_holder(&self, now: Instant) -> Option<&Holder> {
        self.holder.as_ref().filter(|h| h.expires_at > now)
    }

    fn take(&mut self, req: &Request<'_>, now: Instant) -> u64 {
        self.fence += 1;
        self.holder = Some(Holder {
            owner: req.owner,
            expires_at: now + req.ttl,
            label: req.label.map(str::to_string),
        });
        self.fence
    }

    fn wake_head(&self) {
        if let Some(head) = self.queue.front() {
            head.wake.notify_one();
        }
    }

    fn info(&self, name: &Name, now: Instant) -> Option<LockInfo> {
        self.live_holder(now).map(|h| LockInfo {
            name: name.to_string(),
            owner: h.owner.to_string(),
            label: h.label.clone(),
            fence: Some(self.fence),
            expires_in: Some(h.expires_at - now),
            waiters: Some(self.queue.len()),
            holding: Holding::Lock,
        })
    }
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<Name, Slot>> {
        // A panic while holding this mutex cannot leave a slot half-written
        // (every update is a single assignment), so poisoning is ignored.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn with_slot<T>(&self, name: &Name, f: impl FnOnce(&mut Slot) -> T) -> T {
        let mut slots = self.slots();
        match slots.get_mut(name) {
            Some(slot) => f(slot),
            None => f(slots.entry(name.clone()).or_default()),
        }
    }

    fn owned_live<T>(
        &self,
        name: &Name,
        owner: OwnerId,
        f: impl FnOnce(&mut Slot, Instant) -> T,
    ) -> Result<T> {
        let now = Instant::now();
        let mut slots = self.slots();
        match slots.get_mut(name) {
            Some(slot) if slot.live_holder(now).is_some_and(|h| h.owner == owner) => {
                Ok(f(slot, now))
            }
            _ => Err(Error::NotOwner {
                name: name.to_string(),
            }),
        }
    }
}

/// Removes a cancelled or timed-out waiter from its queue, passing the turn
/// on when it was at the head.
struct QueuePlace<'a> {
    backend: &'a MemoryBackend,
    name: &'a Name,
    id: u64,
}

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.backend.with_slot(self.name, |slot| {
            if let Some(at) = slot.queue.iter().position(|w| w.id == self.id) {
                slot.queue.remove(at);
                if at == 0 && slot.live_holder(Instant::now()).is_none() {
                    slot.wake_head();
                }
            }
        });
    }
}

/// What MemoryBackend guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: true,
    pushed_wakeups: true,
    server_detects_loss: false,
    server_clock: true,
    expires: true,
    durable: false,
    cross_process: false,
    cross_host: false,
    permanent_records: false,
    native_rw_lock: false,
    native_semaphore: false,
};

#[async_trait]
impl LockBackend for MemoryBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        "memory://".into()
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        let now = Instant::now();
        Ok(self.with_slot(req.name, |slot| {
            if let Some(h) = slot.live_holder(now) {
                Attempt::Held {
                    expires_in: Some(h.expires_at - now),
                }
            } else if !slot.queue.is_empty() {
                Attempt::Held { expires_in: None }
            } else {
                Attempt::Granted {
                    fence: slot.take(req, now),
                }
            }
        }))
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        let wake = Arc::new(Notify::new());
        let started = Instant::now();
        let id = self.with_slot(req.name, |slot| {
            if slot.queue.is_empty() && slot.live_holder(started).is_none() {
                return Err(slot.take(req, started));
            }
            slot.next_waiter += 1;
            let id = slot.next_waiter;
            slot.queue.push_back(Waiter {
                id,
                wake: wake.clone(),
            });
            Ok(id)
        });
        let id = match id {
            Ok(id) => id,
            Err(fence) => return Ok(Some(Grant { fence, started })),
        };
        let place = QueuePlace {
            backend: self,
            name: req.name,
            id,
        };
        loop {
            let now = Instant::now();
            let holder_expiry = self.with_slot(req.name, |slot| {
                let at_head = slot.queue.front().is_some_and(|w| w.id == id);
                match slot.live_holder(now) {
                    None if at_head => {
                        slot.queue.pop_front();
                        Err(slot.take(req, now))
                    }
                    holder => Ok(holder.map(|h| h.expires_at)),
                }
            });
            let holder_expiry = match holder_expiry {
                Ok(expiry) => expiry,
                Err(fence) => {
                    std::mem::forget(place);
                    return Ok(Some(Grant {
                        fence,
                        started: now,
                    }));
                }
            };
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            let wake_at = [deadline, holder_expiry].into_iter().flatten().min();
            match wake_at {
                Some(at) => {
                    tokio::select! {
                        _ = wake.notified() => {}
                        _ = tokio::time::sleep_until(at.into()) => {}
                    }
                }
                None => wake.notified().await,
            }
        }
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        self.owned_live(name, owner, |slot, now| {
            if let Some(h) = slot.holder.as_mut() {
                h.expires_at = now + ttl;
            }
        })
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        self.owned_live(name, owner, |slot, _| {
            slot.holder = None;
            slot.wake_head();
        })
    }

    async fn force_hold_back(
        &self,
        name: &Name,
        holder: &LockInfo,
        placeholder: OwnerId,
        label: &str,
    ) -> Result<()> {
        let owner = OwnerId::from_hex(&holder.owner).ok_or_else(|| Error::NotOwner {
            name: name.to_string(),
        })?;
        self.owned_live(name, owner, |slot, _| {
            if let Some(h) = slot.holder.as_mut() {
                h.owner = placeholder;
                h.label = Some(label.to_string());
            }
        })
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let now = Instant::now();
        Ok(self.slots().get(name).and_then(|slot| slot.info(name, now)))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let now = Instant::now();
        let mut held: Vec<_> = self
            .slots()
            .iter()
            .filter(|(name, _)| name.as_str().starts_with(prefix))
            .filter_map(|(name, slot)| slot.info(name, now))
            .collect();
        held.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(held)
    }
}
