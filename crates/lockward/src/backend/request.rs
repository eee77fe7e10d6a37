//! What an acquisition asks a store for ([`Request`], of a [`Kind`]) and
//! what it gets back ([`Attempt`], [`Grant`]): the vocabulary of the lock
//! and semaphore seams.

use std::time::{Duration, Instant};

use crate::name::Name;
use crate::owner::OwnerId;

/// One acquisition request.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// What to lock.
    pub name: &'a Name,
    /// Who asks.
    pub owner: OwnerId,
    /// How long the store keeps the lock without renewal.
    pub ttl: Duration,
    /// Human label of the holder, stored where the backend can.
    pub label: Option<&'a str>,
    /// Which kind of hold is asked for. Only a backend that declares
    /// [`Capabilities::native_rw_lock`](super::Capabilities::native_rw_lock) gets anything but [`Kind::Mutex`].
    pub kind: Kind,
}

/// The kind of hold a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A plain exclusive lock.
    Mutex,
    /// The write side of a native read-write lock: exclusive.
    Writer,
    /// The read side of a native read-write lock: shared with readers.
    Reader,
    /// A holder of `take` of the `of` permits of a native semaphore: taken
    /// through the semaphore seam ([`PermitBackend`](super::PermitBackend))
    /// of a backend that declares [`Capabilities::native_semaphore`](super::Capabilities::native_semaphore), never
    /// through the lock seam.
    Permits {
        /// How many permits the semaphore has.
        of: u32,
        /// How many this holder takes.
        take: u32,
    },
}

/// The outcome of one non-waiting attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The lock is ours, with this fencing token.
    Granted {
        /// The fencing token.
        fence: u64,
    },
    /// Someone else holds it (or waiters queue ahead of us).
    Held {
        /// When the holder's lease runs out, if the store can tell: a waiter
        /// re-checks then, since an expiry pushes no notification.
        expires_in: Option<Duration>,
    },
}

/// A granted lock, as a waiting acquisition returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The fencing token.
    pub fence: u64,
    /// When the successful request started: the local deadline counts from
    /// here.
    pub started: Instant,
}
