//! Recipes built on the lock, generic over every backend.

#[cfg(feature = "cron")]
pub mod cron;
pub mod election;
pub mod idempotency;
pub mod semaphore;

pub use election::{Candidate, ElectionConfig, Leadership, Revoked};
pub use idempotency::{Idempotency, IdempotencyError, Idempotent};
pub use semaphore::{Permit, Semaphore};
