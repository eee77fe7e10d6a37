//! `memory://`: locks shared by the threads and tasks of one process.
//!
//! Waiters queue per name and are served first come, first served: the
//! holder's release (or its expiry) wakes only the head of the queue, which
//! takes the lock itself. A try that finds waiters queued is refused, so
//! nobody jumps the queue. Fence counters live as long as the store.

mod core;
pub(crate) mod doctor;
mod mutex;
mod records;

pub use core::{MemoryBackend, CAPABILITIES};
