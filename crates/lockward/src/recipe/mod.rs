//! Recipes built on the lock, generic over every backend.

#[cfg(feature = "cron")]
pub mod cron;
pub mod election;

pub use election::{Candidate, ElectionConfig, Leadership, Revoked};
