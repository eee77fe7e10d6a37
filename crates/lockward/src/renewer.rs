//! One background renewal scheduler per store, instead of a task per guard:
//! taking a lock costs a channel send rather than a task spawn, and a store
//! holding thousands of locks runs one timer queue.
//!
//! Guards share their [`Standing`] with the scheduler through a `Weak`, so a
//! dropped guard simply falls out of the queue at its next due time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::backend::Hold;
use crate::error::{Error, LostReason};
use crate::lease::{delayed_deadline, Lease};
use crate::name::Name;
use crate::owner::OwnerId;

/// What a guard knows about its lease right now; shared with its renewals
/// and its lost signals.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Standing {
    pub deadline: Instant,
    /// The holder's TTL; the store keeps the lease `lock_delay` longer.
    pub ttl: Duration,
    pub lock_delay: Duration,
    pub lost: Option<LostReason>,
    /// Released or dropped on purpose: never renewed, never "lost".
    pub ended: bool,
}

impl Standing {
    /// The TTL the store keeps the lease for.
    pub fn store_ttl(&self) -> Duration {
        self.ttl + self.lock_delay
    }

    /// The local deadline of a lease the store kept from a request sent at
    /// `started`: the lock-delay comes after it.
    pub fn deadline_from(&self, started: Instant) -> Instant {
        delayed_deadline(started, self.ttl, self.lock_delay)
    }

    pub fn lost_at(&self, now: Instant) -> Option<LostReason> {
        if self.ended {
            return None;
        }
        self.lost
            .or((now >= self.deadline).then_some(LostReason::Expired))
    }
}

pub(crate) type SharedStanding = Arc<watch::Sender<Standing>>;

struct Entry {
    /// What renews it: the lock seam, or the semaphore seam.
    hold: Arc<dyn Hold>,
    name: Name,
    owner: OwnerId,
    /// The lease's fence: how a forced unlock's trace names it.
    fence: u64,
    every: Duration,
    standing: Weak<watch::Sender<Standing>>,
}

enum Msg {
    Register(Entry),
    Reschedule(u64, Instant),
    Forget(u64),
}

/// Handle on a store's scheduler; the scheduler stops when the last handle
/// (held by the store and its guards) is dropped.
pub(crate) struct Renewer {
    tx: mpsc::UnboundedSender<Msg>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Renewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Renewer")
    }
}

impl Renewer {
    /// Starts the scheduler on the current runtime.
    /// `scheme` is the store's, for metrics.
    pub fn start(scheme: &'static str) -> Renewer {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(schedule(scheme, tx.clone(), rx));
        Renewer { tx, task }
    }

    /// Whether the scheduler stopped (its runtime was shut down).
    pub fn is_stopped(&self) -> bool {
        self.task.is_finished()
    }

    /// Renews `standing`'s lease every `every` until it ends or is lost.
    pub fn register(
        &self,
        hold: &Arc<dyn Hold>,
        lease: &Lease,
        every: Duration,
        standing: &SharedStanding,
    ) {
        let _ = self.tx.send(Msg::Register(Entry {
            hold: hold.clone(),
            name: lease.name.clone(),
            owner: lease.owner,
            fence: lease.fence,
            every,
            standing: Arc::downgrade(standing),
        }));
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn schedule(
    scheme: &'static str,
    tx: mpsc::UnboundedSender<Msg>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    let mut due: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut entries: HashMap<u64, Arc<Entry>> = HashMap::new();
    let mut next_id = 0u64;
    loop {
        let next = due.peek().map(|Reverse((at, _))| *at);
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(Msg::Register(entry)) => {
                    next_id += 1;
                    due.push(Reverse((Instant::now() + entry.every, next_id)));
                    entries.insert(next_id, Arc::new(entry));
                }
                Some(Msg::Reschedule(id, at)) => due.push(Reverse((at, id))),
                Some(Msg::Forget(id)) => {
                    entries.remove(&id);
                }
                None => return,
            },
            _ = sleep_until(next) => {
                let now = Instant::now();
                while let Some(Reverse((at, id))) = due.peek().copied() {
                    if at > now {
                        break;
                    }
                    due.pop();
                    let Some(entry) = entries.get(&id) else { continue };
                    match entry.standing.upgrade() {
                        Some(standing) => {
                            tokio::spawn(renew_once(
                                scheme, id, entry.clone(), standing, tx.clone(),
                            ));
                        }
                        None => {
                            entries.remove(&id);
                        }
                    }
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// One renewal: extend before the deadline; on refusal, signal lost; on a
/// transient error, retry sooner while the deadline allows.
#[tracing::instrument(name = "renew", level = "trace", skip_all,
    fields(lock = %entry.name, store = scheme))]
async fn renew_once(
    scheme: &'static str,
    id: u64,
    entry: Arc<Entry>,
    standing: SharedStanding,
    tx: mpsc::UnboundedSender<Msg>,
) {
    let current = *standing.borrow();
    if current.ended || current.lost.is_some() {
        let _ = tx.send(Msg::Forget(id));
        return;
    }
    let lose = |reason| {
        let mut first = false;
        standing.send_modify(|s| {
            first = s.lost.is_none();
            s.lost = s.lost.or(Some(reason));
        });
        if first {
            crate::metrics::lost(scheme, reason);
            tracing::warn!(lock = %entry.name, store = scheme, ?reason, "lease lost");
        }
        let _ = tx.send(Msg::Forget(id));
    };
    if Instant::now() >= current.deadline {
        return lose(LostReason::Expired);
    }
    let started = Instant::now();
    let attempt = tokio::time::timeout_at(
        current.deadline.into(),
        entry
            .hold
            .extend(&entry.name, entry.owner, current.store_ttl()),
    )
    .await;
    match attempt {
        Ok(Ok(())) => {
            crate::metrics::renewal(scheme, true);
            standing.send_modify(|s| s.deadline = s.deadline_from(started));
            let _ = tx.send(Msg::Reschedule(id, Instant::now() + entry.every));
        }
        Ok(Err(Error::NotOwner { .. })) => lose(
            entry
                .hold
                .why_refused(&entry.name, entry.owner, entry.fence)
                .await,
        ),
        Ok(Err(Error::Lost { reason, .. })) => lose(reason),
        Ok(Err(e)) => {
            crate::metrics::renewal(scheme, false);
            tracing::warn!(name = %entry.name, error = %e, "renewal failed; retrying before the deadline");
            let left = current.deadline.saturating_duration_since(Instant::now());
            let pause = (left / 4).clamp(Duration::from_millis(1), entry.every);
            let _ = tx.send(Msg::Reschedule(id, Instant::now() + pause));
        }
        Err(_) => lose(LostReason::Expired),
    }
}
