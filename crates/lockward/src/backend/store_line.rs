//! Waiting in the store's own line: a waiter joins a server-side queue of
//! the name, keeps its place there leased, and is woken only when the
//! release names it next, so a release wakes one waiter, not the herd.
//!
//! A waiter that crashes leaves a place that lapses after its lease; one
//! that gives up (deadline, cancellation) leaves the line at once. A waiter
//! that misses its notification still re-checks at the holder's expiry and
//! whenever it renews its place. The model
//! `crates/lockward-models/src/redis_line.rs` checks the line on Redis
//! (FIFO, nobody left behind after a lost wake-up) over every
//! interleaving within its bounds (docs/models.md).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::recheck::{first_attempt, recheck_until_granted};
use super::{Attempt, Grant, LockBackend, Request, Subscription};
use crate::error::Result;
use crate::name::Name;
use crate::owner::OwnerId;

/// Leaving the line, owning everything it needs, so it can run after the
/// wait that spawned it is gone.
pub type Leave = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The longest lease of a place in line: how long a killed waiter can hold
/// up the line at most.
const MAX_PLACE: Duration = Duration::from_secs(3);
/// The shortest: each waiter renews its place three times per lease.
const MIN_PLACE: Duration = Duration::from_millis(300);

/// A store that keeps a line of waiters per name.
#[async_trait]
pub trait InLine: LockBackend {
    /// One attempt that joins the line of `req.name`, or keeps the caller's
    /// place in it for `place` more. Granted only to the first live place
    /// (or to anyone when nobody queues); otherwise `Held { expires_in }`
    /// says when to look again (the holder's expiry, for the first in line).
    /// `ticket` is the waiter's wall clock in µs when it started waiting,
    /// the same on every attempt, for stores that order the line by the
    /// client's word (Redlock's masters); the others order by their own.
    async fn try_in_line(&self, req: &Request<'_>, place: Duration, ticket: u64)
        -> Result<Attempt>;

    /// Notifications of the turns of `owner` on `name`.
    async fn subscribe_turn(&self, name: &Name, owner: OwnerId) -> Result<Subscription>;

    /// Takes the caller's place out of the line (and tells the next one if
    /// the lock is free).
    fn leave_line(&self, name: &Name, owner: OwnerId) -> Leave;
}

/// How long a waiter's place lasts for a lock of `ttl`: its lease, within
/// [300 ms, 3 s].
pub fn place_lease(ttl: Duration) -> Duration {
    ttl.clamp(MIN_PLACE, MAX_PLACE)
}

/// [`LockBackend::acquire`] for stores with a line: a free lock is taken at
/// once (without joining); otherwise the waiter joins the line and waits
/// for its turn. A waiter that times out leaves the line before it
/// returns; dropping the future leaves it in the background.
///
/// Cancellation: dropping the future leaves the line (best effort; a place left
/// behind lapses with its lease); a grant in flight is released by the
/// [`Store`](crate::Store).
pub async fn acquire_in_line<B: InLine + ?Sized>(
    backend: &B,
    req: &Request<'_>,
    deadline: Option<Instant>,
) -> Result<Option<Grant>> {
    if let Some(over) = first_attempt(backend.try_acquire(req), deadline).await? {
        return Ok(over);
    }
    // Subscribed before joining, so the turn cannot come unnoticed.
    let subscription = backend.subscribe_turn(req.name, req.owner).await?;
    let mut leave = LeaveOnDrop(Some(backend.leave_line(req.name, req.owner)));
    let place = place_lease(req.ttl);
    let ticket = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let grant = recheck_until_granted(req, deadline, subscription, place / 3, || {
        backend.try_in_line(req, place, ticket)
    })
    .await;
    match &grant {
        // The grant took our place out of the line.
        Ok(Some(_)) => leave.0 = None,
        // Timed out: leave before saying so, so that a try made right
        // after the error does not find this waiter's place still there.
        Ok(None) => {
            if let Some(leaving) = leave.0.take() {
                leaving.await;
            }
        }
        // The store failed: leaving may hang as long; in the background.
        Err(_) => {}
    }
    grant
}

/// Spawns the leave when the wait ends without the lock, however it ends.
struct LeaveOnDrop(Option<Leave>);

impl Drop for LeaveOnDrop {
    fn drop(&mut self) {
        if let (Some(leave), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(leave);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_lasts_between_the_bounds() {
        assert_eq!(place_lease(Duration::from_millis(1)), MIN_PLACE);
        assert_eq!(place_lease(Duration::from_secs(1)), Duration::from_secs(1));
        assert_eq!(place_lease(Duration::MAX), MAX_PLACE);
    }
}
