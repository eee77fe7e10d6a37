//! What an acquisition returns, and what `inspect` shows.

use std::time::{Duration, Instant};

use crate::duration::drift;
use crate::name::Name;
use crate::owner::OwnerId;

/// A held lease: the facts of one acquisition.
///
/// The fence is the fencing token: greater than zero and strictly greater
/// than every token the same store issued earlier for the same name. Send
/// it with every write to the protected resource (see the `fence` module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// What is locked.
    pub name: Name,
    /// Who holds it.
    pub owner: OwnerId,
    /// The fencing token.
    pub fence: u64,
    /// The TTL it was taken or last extended with.
    pub ttl: Duration,
    /// Until when this holder may act: request start + TTL − drift,
    /// drift = TTL/100 + 2 ms. Conservative: the store keeps the lock at
    /// least this long unless its clock jumps.
    pub deadline: Instant,
}

/// The conservative local deadline of a lease requested at `started`.
pub fn local_deadline(started: Instant, ttl: Duration) -> Instant {
    delayed_deadline(started, ttl, Duration::ZERO)
}

/// The local deadline of a lease the store keeps `ttl + lock_delay` from
/// a request at `started`: the drift is counted over both, and the
/// lock-delay comes after the deadline (see `LockOptions::lock_delay`).
/// Across `lockward serve` too, as the model
/// `crates/lockward-models/src/lease_deadline.rs` checks.
pub(crate) fn delayed_deadline(started: Instant, ttl: Duration, lock_delay: Duration) -> Instant {
    let kept = ttl + lock_delay;
    started + kept.saturating_sub(drift(kept)).saturating_sub(lock_delay)
}

impl Lease {
    /// Time left before the local deadline (zero once it passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// A lock as the store sees it, for `inspect` and `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// What is locked.
    pub name: String,
    /// The holder's owner id, as the store records it (hex for lockward's own).
    pub owner: String,
    /// The holder's label (`host:pid`, or what
    /// [`LockOptions::label`](crate::LockOptions::label) gave), where the
    /// backend stores one.
    pub label: Option<String>,
    /// The holder's fencing token, where the backend can tell.
    pub fence: Option<u64>,
    /// Time until the store frees the lock, if it expires by time.
    pub expires_in: Option<Duration>,
    /// Number of waiters, where the backend knows them.
    pub waiters: Option<usize>,
    /// What the row's holder holds: the lock, one reader's share of it, or
    /// some of a semaphore's permits.
    pub holding: Holding,
}

/// What a row of [`Store::inspect`](crate::Store::inspect) and
/// [`Store::list`](crate::Store::list) shows its holder holding. Readers
/// and a semaphore's holders have a row each, named `LOCK#reader/OWNER`
/// and `SEMAPHORE#permit/ID`; this says so without parsing the name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Holding {
    /// The lock `name` (also a read-write lock's writer, and a ledger
    /// semaphore's slot, which is a lock).
    #[default]
    Lock,
    /// One reader's share of the read-write lock `lock`, where the store
    /// keeps readers natively.
    Reader {
        /// The read-write lock.
        lock: String,
    },
    /// Permits of the semaphore `semaphore`, where the store keeps
    /// semaphores natively.
    Permits {
        /// The semaphore.
        semaphore: String,
    },
}
