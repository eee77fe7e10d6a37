//! The memory store's lock seam: acquire (first come, first served),
//! extend, release, inspect, list.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::Notify;

use crate::backend::{Attempt, Capabilities, Grant, LockBackend, Request};
use crate::error::{Error, Result};
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

use super::core::{MemoryBackend, QueuePlace, Waiter, CAPABILITIES};

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
