//! The memory store's type: its slots (holder, fence counter, the queue of
//! waiters) per name, and what it guarantees (`CAPABILITIES`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;

use crate::backend::{Capabilities, Request};
use crate::error::{Error, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// The in-process backend. Clone the [`Store`](crate::Store) to share it.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    pub(super) slots: Mutex<HashMap<Name, Slot>>,
    pub(super) records: Mutex<std::collections::BTreeMap<String, (String, Instant)>>,
    /// Versioned records: value, version, expiry. Expired entries stay, so
    /// their version keeps counting.
    pub(super) versioned: Mutex<HashMap<String, (String, u64, Instant)>>,
}

#[derive(Debug, Default)]
pub(super) struct Slot {
    pub(super) fence: u64,
    pub(super) holder: Option<Holder>,
    pub(super) queue: VecDeque<Waiter>,
    pub(super) next_waiter: u64,
}

#[derive(Debug)]
pub(super) struct Holder {
    pub(super) owner: OwnerId,
    pub(super) expires_at: Instant,
    pub(super) label: Option<String>,
}

#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) id: u64,
    pub(super) wake: Arc<Notify>,
}

impl Slot {
    pub(super) fn live_holder(&self, now: Instant) -> Option<&Holder> {
        self.holder.as_ref().filter(|h| h.expires_at > now)
    }

    pub(super) fn take(&mut self, req: &Request<'_>, now: Instant) -> u64 {
        self.fence += 1;
        self.holder = Some(Holder {
            owner: req.owner,
            expires_at: now + req.ttl,
            label: req.label.map(str::to_string),
        });
        self.fence
    }

    pub(super) fn wake_head(&self) {
        if let Some(head) = self.queue.front() {
            head.wake.notify_one();
        }
    }

    pub(super) fn info(&self, name: &Name, now: Instant) -> Option<LockInfo> {
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

    pub(super) fn slots(&self) -> MutexGuard<'_, HashMap<Name, Slot>> {
        // A panic while holding this mutex cannot leave a slot half-written
        // (every update is a single assignment), so poisoning is ignored.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn with_slot<T>(&self, name: &Name, f: impl FnOnce(&mut Slot) -> T) -> T {
        let mut slots = self.slots();
        match slots.get_mut(name) {
            Some(slot) => f(slot),
            None => f(slots.entry(name.clone()).or_default()),
        }
    }

    pub(super) fn owned_live<T>(
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
pub(super) struct QueuePlace<'a> {
    pub(super) backend: &'a MemoryBackend,
    pub(super) name: &'a Name,
    pub(super) id: u64,
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
