//! The lock seam: what a backend does to take, wait for, extend, release
//! and inspect a lock. Leases, guards, renewal and deadlines are built on
//! top of it by [`Store`](crate::Store), so every backend gets them alike.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::recheck::{first_attempt, recheck_until_granted, PUSHED_SAFETY_NET};
use super::{Attempt, Capabilities, Grant, Request, Subscription};
use crate::error::Result;
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

/// The lock operations of a store: the first of the two seams a backend
/// implements (the other is [`RecordBackend`](super::RecordBackend)).
///
/// Every method is owner-checked and atomic on the store. Cancelling a call
/// (dropping its future) may leave its request in flight on the store;
/// [`Store`](crate::Store) releases what such a request may have granted.
#[async_trait]
pub trait LockBackend: Send + Sync + 'static {
    /// What this backend guarantees.
    fn capabilities(&self) -> Capabilities;

    /// The store's address for messages, with any password redacted.
    fn address(&self) -> String;

    /// The longest TTL a lock may have here, when the store bounds it
    /// (ZooKeeper: the session timeout).
    fn max_ttl(&self) -> Option<Duration> {
        None
    }

    /// The semaphore seam, when this store keeps semaphores natively
    /// ([`Capabilities::native_semaphore`]). The default has none.
    fn permits(&self) -> Option<&dyn super::PermitBackend> {
        None
    }

    /// One attempt, without waiting.
    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt>;

    /// Subscribes to notifications for `name`. The default polls.
    async fn subscribe(&self, _name: &Name) -> Result<Subscription> {
        Ok(Subscription::polling())
    }

    /// Waits until the lock is granted or `deadline` passes (`Ok(None)`).
    /// Dropping the future cancels the wait and leaves nothing behind.
    ///
    /// The default subscribes, then re-checks with [`try_acquire`](Self::try_acquire)
    /// at each notification, at the holder's expiry, or by backoff when the
    /// backend cannot push. Queue-based backends (FIFO) override it.
    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        acquire_by_rechecking(self, req, deadline).await
    }

    /// Pushes the holder's expiry to now + `ttl`. [`Error::NotOwner`](crate::Error::NotOwner)
    /// when `owner` does not hold a live lease on `name`.
    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()>;

    /// Frees the lock. [`Error::NotOwner`](crate::Error::NotOwner) when
    /// `owner` does not hold a live lease on `name`.
    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()>;

    /// Ends `holder`'s lease on `name` although this process is not its
    /// owner, for an operator whose holder is stuck.
    /// [`Error::NotOwner`](crate::Error::NotOwner) when `holder` no longer
    /// holds it. The default releases as the holder's owner; stores whose
    /// release needs the holder's own session override it.
    async fn force_release(&self, name: &Name, holder: &LockInfo) -> Result<()> {
        let owner = OwnerId::from_hex(&holder.owner).ok_or_else(|| crate::Error::NotOwner {
            name: name.to_string(),
        })?;
        self.release(name, owner).await
    }

    /// Ends `holder`'s lease on `name` as [`force_release`](Self::force_release)
    /// does, but keeps the name taken until that lease would have run out:
    /// the lease passes to `placeholder` (labelled `label` where the store
    /// keeps labels), with the holder's expiry and fence, and nobody renews
    /// it. The holder's renewals are refused from then on. Asked only for a
    /// holder that took the lock with a lock-delay, of a store that declares
    /// [`Capabilities::lock_delay`]; the default says it is not supported.
    /// [`Error::NotOwner`](crate::Error::NotOwner) when `holder` no longer
    /// holds it.
    async fn force_hold_back(
        &self,
        _name: &Name,
        _holder: &LockInfo,
        _placeholder: OwnerId,
        _label: &str,
    ) -> Result<()> {
        Err(crate::Error::NotSupported {
            address: self.address(),
            what: "holding a name back after a forced unlock",
            why: "this store cannot keep a lease its holder's session no longer renews",
        })
    }

    /// The current holder of `name`, if any.
    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>>;

    /// Every held lock whose name starts with `prefix`, sorted by name.
    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>>;
}

/// The default waiting strategy of [`LockBackend::acquire`]: a first try,
/// then a subscription to the name's wakeups and a try after each one (at
/// the holder's expiry, and by backoff where nothing is pushed).
///
/// Cancellation: dropping the future ends the wait and its subscription; a
/// try in flight may still land, as on any call of the seam.
pub async fn acquire_by_rechecking<B: LockBackend + ?Sized>(
    backend: &B,
    req: &Request<'_>,
    deadline: Option<Instant>,
) -> Result<Option<Grant>> {
    // A free lock is taken without subscribing first: that saves the
    // subscription's round trips on every uncontended acquire. A release
    // between this attempt and the subscription is not missed: the loop
    // tries again once subscribed, before it waits.
    if let Some(over) = first_attempt(backend.try_acquire(req), deadline).await? {
        return Ok(over);
    }
    let subscription = backend.subscribe(req.name).await?;
    recheck_until_granted(req, deadline, subscription, PUSHED_SAFETY_NET, || {
        backend.try_acquire(req)
    })
    .await
}

/// [`Error::NotOwner`](crate::Error::NotOwner) unless the owner-checked
/// statement or script changed exactly one lock.
// Not every build has a store that uses it.
#[allow(dead_code)]
pub(crate) fn owner_checked(name: &Name, changed: u64) -> Result<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(crate::Error::NotOwner {
            name: name.to_string(),
        })
    }
}

/// For `list`: inspects each name found (once each, in order) and keeps the
/// ones held.
// Not every build has a store that uses it.
#[allow(dead_code)]
pub(crate) async fn inspect_each<B: LockBackend + ?Sized>(
    backend: &B,
    mut names: Vec<Name>,
) -> Result<Vec<LockInfo>> {
    names.sort();
    names.dedup();
    let mut held = Vec::new();
    for name in names {
        if let Some(info) = backend.inspect(&name).await? {
            held.push(info);
        }
    }
    Ok(held)
}
