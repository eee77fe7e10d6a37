//! Dapr's distributed lock API (`TryLockAlpha1`, `UnlockAlpha1`) on the
//! daemon's port, so every Dapr SDK can lock through lockward.
//!
//! Dapr's lock has no wait, no renewal and no fence: a lock is a lease
//! held by a `lock_owner` string until it expires or is unlocked. So a
//! TryLock takes the lock at once or answers `success: false`, holds it
//! for `expiry_in_seconds` without renewing it, and puts the fence in the
//! `lockward-fence` response header for clients that can read it. The
//! `resource_id` is the lock's name as-is: `lockward run`, `status` and the
//! other clients see the same lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockward::{Guard, LockOptions, Renewal, Store};
use tonic::{Request, Response, Status};

use crate::capacity::{Admitted, Capacity};
use crate::errors::{invalid, status_of};
use crate::pb_dapr::{
    dapr_server::Dapr, unlock_response, TryLockRequest, TryLockResponse, UnlockRequest,
    UnlockResponse,
};

/// The response header that carries a TryLock's fence.
pub const FENCE_HEADER: &str = "lockward-fence";

/// The Dapr store name lockward answers to unless told another.
pub const DEFAULT_DAPR_STORE: &str = "lockward";

/// The longest lease a TryLock may ask for.
const LONGEST_EXPIRY: Duration = Duration::from_secs(7 * 24 * 3600);

/// One lock taken through Dapr's API.
struct DaprHold {
    owner: String,
    guard: Guard,
    /// Its place among the daemon's leases.
    _admitted: Admitted,
}

/// Dapr's lock calls over one store.
#[derive(Clone)]
pub struct DaprLocks {
    store: Store,
    store_name: String,
    /// The locks taken through this API, by resource, until they expire
    /// or are unlocked.
    held: Arc<Mutex<HashMap<String, DaprHold>>>,
    /// The daemon's count of leases, which every lock taken here joins.
    capacity: Capacity,
}

impl DaprLocks {
    /// Dapr's lock calls on `store`, answering to the Dapr store name
    /// `store_name`.
    pub fn new(store: Store, store_name: impl Into<String>) -> DaprLocks {
        DaprLocks {
            store,
            store_name: store_name.into(),
            held: Arc::default(),
            capacity: Capacity::new(usize::MAX),
        }
    }

    /// Counts every lock taken here among `capacity`'s leases.
    pub(crate) fn admitted_by(mut self, capacity: Capacity) -> DaprLocks {
        self.capacity = capacity;
        self
    }

    fn check_store(&self, store_name: &str) -> Result<(), Status> {
        if store_name == self.store_name {
            return Ok(());
        }
        Err(invalid(format!(
            "lock store {store_name:?} is not configured; this one is {:?}",
            self.store_name
        )))
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, DaprHold>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets `resource` when `guard`'s lease ends by itself (it expired).
    fn forget_when_lost(&self, resource: String, fence: u64, mut lost: lockward::LostSignal) {
        let held = self.held.clone();
        tokio::spawn(async move {
            lost.wait().await;
            let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
            if held
                .get(&resource)
                .is_some_and(|h| h.guard.fence() == fence)
            {
                held.remove(&resource);
            }
        });
    }
}

#[tonic::async_trait]
impl Dapr for DaprLocks {
    async fn try_lock_alpha1(
        &self,
        request: Request<TryLockRequest>,
    ) -> Result<Response<TryLockResponse>, Status> {
        let request = request.into_inner();
        self.check_store(&request.store_name)?;
        if request.lock_owner.is_empty() {
            return Err(invalid("lock_owner: give the lock's owner"));
        }
        let expiry = u64::try_from(request.expiry_in_seconds)
            .ok()
            .filter(|s| *s > 0)
            .map(Duration::from_secs)
            .filter(|d| *d <= LONGEST_EXPIRY)
            .ok_or_else(|| {
                invalid(format!(
                    "expiry_in_seconds: {} is not between 1 and {}",
                    request.expiry_in_seconds,
                    LONGEST_EXPIRY.as_secs()
                ))
            })?;
        let admitted = self.capacity.admit()?;
        let opts = LockOptions::new()
            .ttl(expiry)
            .renewal(Renewal::Off)
            .label(format!("dapr:{}", request.lock_owner));
        let guard = match self.store.try_acquire(&request.resource_id, &opts).await {
            Ok(guard) => guard,
            Err(lockward::Error::Busy { .. }) => {
                return Ok(Response::new(TryLockResponse { success: false }));
            }
            Err(e) => return Err(status_of(&e)),
        };
        let fence = guard.fence();
        self.forget_when_lost(request.resource_id.clone(), fence, guard.lost_signal());
        self.held().insert(
            request.resource_id,
            DaprHold {
                owner: request.lock_owner,
                guard,
                _admitted: admitted,
            },
        );
        let mut response = Response::new(TryLockResponse { success: true });
        if let Ok(value) = fence.to_string().parse() {
            response.metadata_mut().insert(FENCE_HEADER, value);
        }
        Ok(response)
    }

    async fn unlock_alpha1(
        &self,
        request: Request<UnlockRequest>,
    ) -> Result<Response<UnlockResponse>, Status> {
        use unlock_response::Status as Unlock;
        let request = request.into_inner();
        self.check_store(&request.store_name)?;
        let answer = |status: Unlock| {
            Ok(Response::new(UnlockResponse {
                status: status as i32,
            }))
        };
        let hold = {
            let mut held = self.held();
            match held.get(&request.resource_id) {
                Some(hold) if hold.owner != request.lock_owner => {
                    return answer(Unlock::LockBelongsToOthers)
                }
                Some(_) => held.remove(&request.resource_id),
                None => None,
            }
        };
        match hold {
            Some(hold) => match hold.guard.release().await {
                Ok(()) => answer(Unlock::Success),
                // It had expired meanwhile.
                Err(lockward::Error::Lost { .. }) => answer(Unlock::LockDoesNotExist),
                Err(_) => answer(Unlock::InternalError),
            },
            // Not taken through this API: held by another client, or free.
            None => match self.store.inspect(&request.resource_id).await {
                Ok(Some(_)) => answer(Unlock::LockBelongsToOthers),
                Ok(None) => answer(Unlock::LockDoesNotExist),
                Err(lockward::Error::InvalidArgument { .. }) => answer(Unlock::LockDoesNotExist),
                Err(_) => answer(Unlock::InternalError),
            },
        }
    }
}
