//! The two seams every store implements, locks ([`LockBackend`]) and
//! records ([`RecordBackend`]), the capabilities each declares, and one
//! folder per backend.
//!
//! A backend only knows names, owners and TTLs; leases, guards, renewal and
//! deadlines are built on top of it by [`Store`](crate::Store), so every
//! backend gets them the same way. See `CONTRIBUTING.md` for adding one.

mod capabilities;
mod locks;
mod records;
mod subscription;
pub mod wait;

#[cfg(feature = "etcd")]
pub mod etcd;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "redis")]
pub mod redlock;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

pub use capabilities::Capabilities;
pub(crate) use locks::{inspect_each, owner_checked};
pub use locks::{Attempt, Grant, LockBackend, Request};
pub use records::{RecordBackend, Versioned};
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
