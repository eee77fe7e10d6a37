//! The semaphore seam: stores that keep a semaphore's holders themselves,
//! an entry per holder and a count of taken permits beside them, so taking
//! a permit costs the same however many hold it.
//!
//! A store declares it with [`Capabilities::native_semaphore`] and returns
//! itself from [`LockBackend::permits`](super::LockBackend::permits).
//! [`Semaphore`](crate::recipe::Semaphore) then admits each holder as a
//! hold of [`Kind::Permits`](super::Kind::Permits): the store takes its
//! permits through this seam, and its guard renews and releases them
//! through it, so a holder gets its lease, renewal, fence and `lost()` as
//! any guard does. Other stores keep the semaphore in a ledger record (see
//! the recipe).

use std::time::Duration;

use async_trait::async_trait;

use super::Request;
use crate::error::{Error, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// A semaphore kept by the store: holders with leases and a count.
///
/// Every call is atomic on the store and its cost does not depend on how
/// many hold the semaphore. A cancelled call may or may not have been
/// applied; a take that lands after its caller gave up is a holder whose
/// lease runs out (the [`Store`](crate::Store) also releases it).
#[async_trait]
pub trait PermitBackend: Send + Sync {
    /// Takes `take` of the `of` permits of `req.name` for `req.owner`,
    /// leased for `req.ttl`, if they fit beside the live holders (holders
    /// whose lease ran out are dropped first). Returns the holder's fence:
    /// larger than every fence the semaphore issued before. Fails with
    /// [`Error::NoPermits`] when they do not fit, saying how many are free.
    /// Taking again for an owner that holds returns its fence (a retried
    /// call).
    async fn take_permits(&self, req: &Request<'_>, of: u32, take: u32) -> Result<u64>;

    /// Pushes the holder's lease to now + `ttl`; [`Error::NotOwner`] when
    /// `owner` holds no live lease on the semaphore.
    async fn extend_permits(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()>;

    /// Gives the holder's permits back; [`Error::NotOwner`] when its lease
    /// had already run out (its permits are given back all the same).
    async fn release_permits(&self, name: &Name, owner: OwnerId) -> Result<()>;

    /// How many permits live holders hold.
    async fn permits_held(&self, name: &Name) -> Result<u64>;

    /// Ends one holder's lease from elsewhere (an operator's forced unlock):
    /// its permits come back at once and its renewals are refused.
    /// `holder` is its row from [`list_permits`](Self::list_permits).
    /// [`Error::NotOwner`] when it no longer holds. The default gives the
    /// permits back as the holder's owner, for stores whose release does
    /// not need the holder's own session.
    async fn force_release_permits(&self, name: &Name, holder: &LockInfo) -> Result<()> {
        let owner = OwnerId::from_hex(&holder.owner).ok_or_else(|| Error::NotOwner {
            name: holder.name.clone(),
        })?;
        self.release_permits(name, owner).await
    }

    /// Every live holder of the semaphores whose name starts with
    /// `prefix`, sorted, for `status`: a row per holder, named
    /// [`holder_row`]`(SEMAPHORE, ID)`. Reads every holder: not for the
    /// acquisition path.
    async fn list_permits(&self, prefix: &str) -> Result<Vec<LockInfo>>;
}

/// The name of a holder's row in `list`: `SEMAPHORE#permit/ID`, as a
/// ledger's slot lock is named (there the ID is the slot number; here the
/// store's id of the holder, in hex).
pub fn holder_row(semaphore: &str, id: &str) -> String {
    format!("{semaphore}#permit/{id}")
}

/// A semaphore holder's row in `list`: named
/// [`holder_row`]`(semaphore, id)` and holding the semaphore's permits;
/// no label, time left or waiters unless the caller sets them.
// Not every build has a store that keeps semaphores itself.
#[allow(dead_code)]
pub(crate) fn permit_row(semaphore: &str, id: &str, owner: String, fence: Option<u64>) -> LockInfo {
    LockInfo {
        name: holder_row(semaphore, id),
        owner,
        label: None,
        fence,
        expires_in: None,
        waiters: None,
        holding: Holding::Permits {
            semaphore: semaphore.to_string(),
        },
    }
}

/// The semaphore and holder id of a row named by [`holder_row`].
pub(crate) fn split_holder_row(row: &str) -> Option<(&str, &str)> {
    row.rsplit_once("#permit/")
        .filter(|(semaphore, id)| !semaphore.is_empty() && !id.is_empty())
}

/// [`Error::NoPermits`] for `take` of `of` permits of which `free` are free.
// Not every build has a store that uses it.
#[allow(dead_code)]
pub(crate) fn no_permits(name: &str, take: u32, free: u64, of: u32) -> Error {
    Error::NoPermits {
        name: name.to_string(),
        why: wanted(take, free, of),
    }
}

/// Why `take` permits do not fit: the text of [`Error::NoPermits`].
pub(crate) fn wanted(take: u32, free: u64, of: u32) -> String {
    format!("{take} wanted, {free} of {of} free")
}
