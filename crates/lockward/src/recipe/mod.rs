//! Recipes built on the lock, generic over every backend.

#[cfg(feature = "cron")]
pub mod cron;
pub mod election;
pub mod held;
pub mod idempotency;
pub mod multi_lock;
pub mod optimistic;
pub mod rate_limit;
pub mod rw_lock;
pub mod semaphore;

pub use election::{elections, Candidate, ElectionConfig, Leadership, Revocation, Revoked};
pub use held::{Held, Wanted};
pub use idempotency::{Begun, Claim, Idempotency, IdempotencyError, Idempotent};
pub use multi_lock::MultiGuard;
pub use optimistic::{Applied, Change, Optimistic, UpdateError, Updated};
pub use rate_limit::{Decision, FixedWindow, Gcra};
pub use rw_lock::{ReadGuard, RwLock};
pub use semaphore::{Permit, Semaphore, MAX_HOLDERS};
