//! The local waiters of one notification connection, by channel, and
//! which of them a message wakes.
//!
//! A waiter registers on a channel for every message, or only for messages
//! whose payload is a given key (PostgreSQL's table channel carries the
//! released name, and a watcher wants its own name's). A message with an
//! empty payload, and every disconnection, wake everyone on the channel,
//! since messages may have been missed. Each waiter holds a `watch`
//! receiver, so a message between its re-check and its next wait is kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use tokio::sync::watch;

use super::Wakeup;

/// The waiters of one channel.
#[derive(Default)]
struct Topic {
    /// Registrations, of either kind: the channel is idle at zero.
    count: usize,
    /// Woken by every message.
    every: Option<watch::Sender<u64>>,
    /// Woken by messages with this payload; with its registrations.
    by_payload: HashMap<Vec<u8>, (usize, watch::Sender<u64>)>,
}

/// Every waiter of one connection, by channel.
#[derive(Default, Clone)]
pub struct Waiters(Arc<Mutex<HashMap<Vec<u8>, Topic>>>);

impl Waiters {
    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Topic>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a waiter on `topic`, for messages whose payload is `key`
    /// or (with `None`) for every message. Returns it and whether it is the
    /// topic's first (the caller then subscribes on the server).
    pub fn register(&self, topic: &[u8], key: Option<&[u8]>) -> (Waiter, bool) {
        let mut topics = self.lock();
        let entry = topics.entry(topic.to_vec()).or_default();
        entry.count += 1;
        let receiver = match key {
            Some(key) => {
                let keyed = entry
                    .by_payload
                    .entry(key.to_vec())
                    .or_insert_with(|| (0, watch::channel(0).0));
                keyed.0 += 1;
                keyed.1.subscribe()
            }
            None => entry
                .every
                .get_or_insert_with(|| watch::channel(0).0)
                .subscribe(),
        };
        let first = entry.count == 1;
        let wakeup = Waiter {
            receiver,
            topic: topic.to_vec(),
            key: key.map(<[u8]>::to_vec),
            waiters: self.clone(),
        };
        (wakeup, first)
    }

    /// Drops one registration, and the topic with its last one.
    fn unregister(&self, topic: &[u8], key: Option<&[u8]>) {
        let mut topics = self.lock();
        let Some(entry) = topics.get_mut(topic) else {
            return;
        };
        entry.count = entry.count.saturating_sub(1);
        if let Some(key) = key {
            if let Some(keyed) = entry.by_payload.get_mut(key) {
                keyed.0 = keyed.0.saturating_sub(1);
                if keyed.0 == 0 {
                    entry.by_payload.remove(key);
                }
            }
        }
        if entry.count == 0 {
            topics.remove(topic);
        }
    }

    /// Whether `topic` has no waiter now.
    pub fn is_idle(&self, topic: &[u8]) -> bool {
        self.lock().get(topic).is_none_or(|t| t.count == 0)
    }

    /// A message on `topic` with `payload` (empty: for everyone).
    pub fn notify(&self, topic: &[u8], payload: &[u8]) {
        let topics = self.lock();
        let Some(entry) = topics.get(topic) else {
            return;
        };
        if let Some(every) = &entry.every {
            every.send_modify(|n| *n += 1);
        }
        if payload.is_empty() {
            for (_, tx) in entry.by_payload.values() {
                tx.send_modify(|n| *n += 1);
            }
        } else if let Some((_, tx)) = entry.by_payload.get(payload) {
            tx.send_modify(|n| *n += 1);
        }
    }

    /// Wakes every waiter (the connection dropped: messages may be lost).
    pub fn notify_everyone(&self) {
        for entry in self.lock().values() {
            let every = entry.every.iter();
            for tx in every.chain(entry.by_payload.values().map(|(_, tx)| tx)) {
                tx.send_modify(|n| *n += 1);
            }
        }
    }
}

/// One waiter's registration; dropping it unregisters.
pub struct Waiter {
    receiver: watch::Receiver<u64>,
    topic: Vec<u8>,
    key: Option<Vec<u8>>,
    waiters: Waiters,
}

impl Waiter {
    /// The topic this waiter registered on.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub fn topic(&self) -> &[u8] {
        &self.topic
    }
}

#[async_trait]
impl Wakeup for Waiter {
    async fn changed(&mut self) {
        if self.receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    fn mark_seen(&mut self) {
        self.receiver.borrow_and_update();
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.waiters.unregister(&self.topic, self.key.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_keyed_message_wakes_its_waiters_only() {
        let waiters = Waiters::default();
        let (mut a, first) = waiters.register(b"t", Some(b"a"));
        assert!(first);
        let (mut b, first) = waiters.register(b"t", Some(b"b"));
        assert!(!first);
        let (mut all, _) = waiters.register(b"t", None);
        waiters.notify(b"t", b"a");
        assert!(a.receiver.has_changed().unwrap());
        assert!(!b.receiver.has_changed().unwrap());
        assert!(all.receiver.has_changed().unwrap());
        a.mark_seen();
        all.mark_seen();
        waiters.notify(b"t", b"");
        assert!(a.receiver.has_changed().unwrap() && b.receiver.has_changed().unwrap());
        b.mark_seen();
        drop((a, b, all));
        assert!(waiters.is_idle(b"t"));
    }
}
