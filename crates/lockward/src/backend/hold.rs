//! The hold seam: what a [`Guard`](crate::Guard) and its renewals need of
//! the store, for one kind of hold (a lock or a reader's share, or a
//! semaphore holder's permits): renew it, give it back, and say why a
//! renewal was refused.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::Backend;
use crate::error::{Error, LostReason, Result};
use crate::name::Name;
use crate::owner::OwnerId;

/// One kind of hold on a store, as its guards renew and release it.
///
/// Cancellation: a cancelled call may or may not have been applied on the
/// store; the guard's deadline and `lost()` stay right either way.
#[async_trait]
pub(crate) trait Hold: Send + Sync {
    /// Pushes the lease `owner` holds on `name` to now + `ttl`;
    /// [`Error::NotOwner`] when it no longer holds.
    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()>;

    /// Gives the lease back; [`Error::NotOwner`] when it no longer held.
    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()>;

    /// Why the store refused to renew the lease `owner` holds on `name`
    /// with `fence`: [`LostReason::ForcedUnlock`] when an operator's forced
    /// unlock left a trace naming it, else [`LostReason::TakenOver`].
    async fn why_refused(&self, name: &Name, owner: OwnerId, fence: u64) -> LostReason;
}

impl std::fmt::Debug for dyn Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hold")
    }
}

/// A lock, or a reader's share of one: the lock seam's extend and release.
pub(crate) struct LockHold(pub Arc<dyn Backend>);

#[async_trait]
impl Hold for LockHold {
    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        self.0.extend(name, owner, ttl).await
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        self.0.release(name, owner).await
    }

    async fn why_refused(&self, name: &Name, owner: OwnerId, fence: u64) -> LostReason {
        crate::forced::why_refused(self.0.as_ref(), name, owner, fence).await
    }
}

/// A semaphore holder's permits, on a store that keeps semaphores
/// natively: the semaphore seam's extend and release.
pub(crate) struct PermitHold(pub Arc<dyn Backend>);

impl PermitHold {
    fn seam(&self) -> Result<&dyn super::PermitBackend> {
        self.0.permits().ok_or_else(|| Error::NotSupported {
            address: self.0.address(),
            what: "a native semaphore",
            why: "this store keeps semaphores in a ledger record",
        })
    }
}

#[async_trait]
impl Hold for PermitHold {
    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        self.seam()?.extend_permits(name, owner, ttl).await
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        self.seam()?.release_permits(name, owner).await
    }

    async fn why_refused(&self, name: &Name, owner: OwnerId, fence: u64) -> LostReason {
        crate::forced::why_refused(self.0.as_ref(), name, owner, fence).await
    }
}
