//! A process's waiters on pushed notifications, by topic (a name's channel)
//! and by turn (the owner a notification is meant for), so that a release
//! which names the next in line wakes that waiter only.
//!
//! A waiter registers for a topic, for its own turn or for every message.
//! A message that names an owner wakes that owner's waiter and the
//! topic-wide ones; a message that names nobody (nobody is in line, or an
//! older client released) and every disconnection wake everyone, since
//! turns may have been missed meanwhile. Each waiter holds a `watch`
//! receiver, so a message between its re-check and its next wait is kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use tokio::sync::watch;

use super::Wakeup;

/// The waiters of one topic.
#[derive(Default)]
struct Topic {
    /// Registrations, of either kind: the topic is idle at zero.
    count: usize,
    /// Woken by every message.
    every: Option<watch::Sender<u64>>,
    /// Woken by messages that name this owner; with its registrations.
    turns: HashMap<Vec<u8>, (usize, watch::Sender<u64>)>,
}

/// Every waiter of one connection, by topic.
#[derive(Default, Clone)]
pub struct Turns(Arc<Mutex<HashMap<Vec<u8>, Topic>>>);

impl Turns {
    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Topic>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a waiter on `topic`, for the turns of `owner` or (with
    /// `None`) for every message. Returns its wakeup and whether it is the
    /// topic's first (the caller then subscribes on the server).
    pub fn register(&self, topic: &[u8], owner: Option<&[u8]>) -> (TurnWakeup, bool) {
        let mut topics = self.lock();
        let entry = topics.entry(topic.to_vec()).or_default();
        entry.count += 1;
        let receiver = match owner {
            Some(owner) => {
                let turn = entry
                    .turns
                    .entry(owner.to_vec())
                    .or_insert_with(|| (0, watch::channel(0).0));
                turn.0 += 1;
                turn.1.subscribe()
            }
            None => entry
                .every
                .get_or_insert_with(|| watch::channel(0).0)
                .subscribe(),
        };
        let first = entry.count == 1;
        let wakeup = TurnWakeup {
            receiver,
            topic: topic.to_vec(),
            owner: owner.map(<[u8]>::to_vec),
            turns: self.clone(),
        };
        (wakeup, first)
    }

    /// Drops one registration, and the topic with its last one.
    fn unregister(&self, topic: &[u8], owner: Option<&[u8]>) {
        let mut topics = self.lock();
        let Some(entry) = topics.get_mut(topic) else {
            return;
        };
        entry.count = entry.count.saturating_sub(1);
        if let Some(owner) = owner {
            if let Some(turn) = entry.turns.get_mut(owner) {
                turn.0 = turn.0.saturating_sub(1);
                if turn.0 == 0 {
                    entry.turns.remove(owner);
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

    /// A message on `topic` naming `next` (empty: nobody in particular).
    pub fn notify(&self, topic: &[u8], next: &[u8]) {
        let topics = self.lock();
        let Some(entry) = topics.get(topic) else {
            return;
        };
        if let Some(every) = &entry.every {
            every.send_modify(|n| *n += 1);
        }
        if next.is_empty() {
            for (_, tx) in entry.turns.values() {
                tx.send_modify(|n| *n += 1);
            }
        } else if let Some((_, tx)) = entry.turns.get(next) {
            tx.send_modify(|n| *n += 1);
        }
    }

    /// Wakes every waiter (the connection dropped: messages may be lost).
    pub fn notify_everyone(&self) {
        for entry in self.lock().values() {
            let every = entry.every.iter();
            for tx in every.chain(entry.turns.values().map(|(_, tx)| tx)) {
                tx.send_modify(|n| *n += 1);
            }
        }
    }
}

/// One waiter's registration; dropping it unregisters.
pub struct TurnWakeup {
    receiver: watch::Receiver<u64>,
    topic: Vec<u8>,
    owner: Option<Vec<u8>>,
    turns: Turns,
}

impl TurnWakeup {
    /// The topic this waiter registered on.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub fn topic(&self) -> &[u8] {
        &self.topic
    }
}

#[async_trait]
impl Wakeup for TurnWakeup {
    async fn changed(&mut self) {
        if self.receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    fn mark_seen(&mut self) {
        self.receiver.borrow_and_update();
    }
}

impl Drop for TurnWakeup {
    fn drop(&mut self) {
        self.turns.unregister(&self.topic, self.owner.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_turn_wakes_its_owner_only() {
        let turns = Turns::default();
        let (mut a, first) = turns.register(b"t", Some(b"a"));
        assert!(first);
        let (mut b, first) = turns.register(b"t", Some(b"b"));
        assert!(!first);
        let (mut all, _) = turns.register(b"t", None);
        turns.notify(b"t", b"a");
        assert!(a.receiver.has_changed().unwrap());
        assert!(!b.receiver.has_changed().unwrap());
        assert!(all.receiver.has_changed().unwrap());
        a.mark_seen();
        all.mark_seen();
        turns.notify(b"t", b"");
        assert!(a.receiver.has_changed().unwrap() && b.receiver.has_changed().unwrap());
        b.mark_seen();
        drop((a, b, all));
        assert!(turns.is_idle(b"t"));
    }
}
