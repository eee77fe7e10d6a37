//! [`Store::force_unlock`]: an operator ends a stuck holder's lease from
//! anywhere (Redisson's `forceUnlock`, Consul's session destroy).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::forced;
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

use super::Store;

/// The label of the placeholder that holds a name back after a forced
/// unlock, where the store keeps labels (`status` shows it).
pub(crate) const HELD_BACK_LABEL: &str = "(lock-delay after a forced unlock)";

impl Store {
    /// Ends `holder`'s lease on `name`, as [`inspect`](Store::inspect)
    /// showed it, although this process does not hold it: for a holder
    /// that is stuck. The holder learns at its next renewal: its `lost()`
    /// fires with [`LostReason::ForcedUnlock`](crate::LostReason::ForcedUnlock)
    /// (`lockward run` then stops its command and exits 76). The next
    /// holder's fence is larger than the ended one's, as after any
    /// release, so a fenced resource refuses the ended holder's late
    /// writes; an unfenced one is not protected while the holder runs on
    /// until its next renewal.
    ///
    /// `name` may also be a row `SEMAPHORE#permit/ID` of [`list`](Store::list),
    /// where the store keeps semaphores natively: that holder's permits
    /// come back at once (lock-delay or not) and it learns at its next
    /// renewal, as a lock's holder does.
    ///
    /// The name is free at once, unless the holder took it with a
    /// [lock-delay](crate::LockOptions::lock_delay): its owner says so, and
    /// the name then stays taken until the lease would have run out (at
    /// most TTL + lock-delay from the holder's last renewal), since a holder
    /// paused past the unlock still believes it holds until its deadline and
    /// the lock-delay protects what cannot check fences after that. Returns
    /// how long the name is held back (`None`: free now); force-unlock the
    /// placeholder shown by `inspect` to free it at once anyway.
    ///
    /// [`Error::NotOwner`] when `holder` no longer holds it (released, or
    /// another holder since: look again); [`Error::NotSupported`] where a
    /// lock lives in its holder's session (PostgreSQL advisory mode: end
    /// that session on the server instead).
    ///
    /// Cancellation: a cancelled call may or may not have ended the lease;
    /// inspect again to know.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use lockward::{LockOptions, LostReason, Store};
    /// let store = Store::memory();
    /// let stuck = store.try_acquire("nightly-report", &LockOptions::new()).await?;
    /// let holder = store.inspect("nightly-report").await?.expect("held");
    /// store.force_unlock("nightly-report", &holder).await?;
    /// let next = store.try_acquire("nightly-report", &LockOptions::new()).await?;
    /// assert!(next.fence() > stuck.fence());
    /// # Ok::<(), lockward::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn force_unlock(&self, name: &str, holder: &LockInfo) -> Result<Option<Duration>> {
        let name = Name::new(name)?;
        if !self.capabilities().force_unlock() {
            return Err(Error::NotSupported {
                address: self.address(),
                what: "a forced unlock",
                why: "a lock here lives in its holder's database session; end that session \
                      (PostgreSQL: pg_terminate_backend; MySQL: KILL) to free it",
            });
        }
        if holder.name != name.as_str() {
            return Err(Error::invalid(
                "holder",
                format!("it describes {:?}, not {:?}", holder.name, name.as_str()),
            ));
        }
        // A holder of a semaphore the store keeps: its guard is named after
        // the semaphore, and so is the trace it looks for.
        let semaphore = match &holder.holding {
            Holding::Permits { semaphore } => Some(Name::new(semaphore)?),
            Holding::Lock | Holding::Reader { .. } => None,
        };
        // Written first, so that the holder refused at its next renewal
        // finds why; it must outlive that renewal.
        let kept = holder
            .expires_in
            .map_or(forced::KEPT_WITHOUT_EXPIRY, |left| {
                left + Duration::from_secs(60)
            });
        let traced = semaphore.as_ref().unwrap_or(&name);
        self.backend
            .put_record(
                &forced::trace_key(traced.as_str())?,
                &forced::trace_of(holder),
                kept,
            )
            .await?;
        if let (Some(semaphore), Some(permits)) = (&semaphore, self.backend.permits()) {
            permits.force_release_permits(semaphore, holder).await?;
            tracing::warn!(semaphore = %semaphore, holder = %holder.name, fence = ?holder.fence,
                store = self.scheme, "forced unlock of a semaphore holder");
            return Ok(None);
        }
        let delayed = OwnerId::from_hex(&holder.owner).is_some_and(|o| o.has_lock_delay());
        let held_back = if delayed && self.capabilities().lock_delay() {
            self.backend
                .force_hold_back(&name, holder, OwnerId::random(), HELD_BACK_LABEL)
                .await?;
            Some(holder.expires_in.unwrap_or_default())
        } else {
            self.backend.force_release(&name, holder).await?;
            None
        };
        tracing::warn!(lock = %name, owner = %holder.owner, fence = ?holder.fence,
            store = self.scheme, ?held_back, "forced unlock");
        Ok(held_back)
    }
}
