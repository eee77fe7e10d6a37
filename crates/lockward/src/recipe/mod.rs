//! Recipes built on the lock, generic over every backend.

pub mod election;

pub use election::{Candidate, ElectionConfig, Leadership, Revoked};
