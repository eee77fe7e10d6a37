//! The two seams every store implements, locks ([`LockBackend`]) and
//! records ([`RecordBackend`]), the semaphore seam some add
//! ([`PermitBackend`]), the capabilities each declares, and one folder per
//! backend.
//!
//! A backend only knows names, owners and TTLs; leases, guards, renewal and
//! deadlines are built on top of it by [`Store`](crate::Store), so every
//! backend gets them the same way. See `CONTRIBUTING.md` for adding one.

mod capabilities;
mod hold;
// Each store uses some of these; a build with few stores, not all.
// Used by the stores that poll for other processes' releases.
#[allow(dead_code)]
mod local_releases;
mod locks;
mod permits;
// Not every build has a store that uses it.
pub mod recheck;
mod records;
mod request;
// Used by the stores whose locks live in server sessions.
#[allow(dead_code)]
pub(crate) mod sessions;
#[cfg(feature = "bench")]
pub mod side;
#[cfg(feature = "bench")]
mod side_client;
#[allow(dead_code)]
mod store_line;
mod subscription;
#[allow(dead_code)]
pub(crate) mod time;
// Not every build has a store that uses it.
#[allow(dead_code)]
pub(crate) mod channel_waiters;

pub mod etcd;
pub mod kubernetes;
pub mod memory;
pub mod mysql;
pub mod postgres;
pub mod redis;
pub mod redlock;
pub mod sqlite;
pub mod zookeeper;

pub use capabilities::Capabilities;
pub(crate) use hold::{Hold, LockHold, PermitHold};
#[allow(unused_imports)]
pub(crate) use local_releases::LocalReleases;
// Helpers for the backends; a build with few backends uses none of them.
pub use locks::{acquire_by_rechecking, LockBackend};
#[allow(unused_imports)]
pub(crate) use locks::{inspect_each, owner_checked};
pub use permits::{holder_row, PermitBackend};
#[allow(unused_imports)]
pub(crate) use permits::{no_permits, permit_row, split_holder_row, wanted};
pub use records::{RecordBackend, Versioned};
pub use request::{Attempt, Grant, Kind, Request};
#[allow(unused_imports)]
pub(crate) use store_line::{acquire_in_line, InLine, Leave};
pub use subscription::{Subscription, Wakeup};

/// A whole store: both seams. Implemented for every type that implements
/// the two; [`Store::from_backend`](crate::Store::from_backend) takes one.
pub trait Backend: LockBackend + RecordBackend {}

impl<T: LockBackend + RecordBackend> Backend for T {}

impl std::fmt::Debug for dyn Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({})", self.address())
    }
}
