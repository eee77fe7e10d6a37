//! `zk://`: locks on a ZooKeeper ensemble, in the layout of Curator's
//! `InterProcessMutex` (see [`paths`]), so Java services on Curator and
//! lockward exclude each other.
//!
//! - **Acquire**: create an ephemeral sequential child of the lock node;
//!   the child with the lowest sequence holds the lock. A waiter watches
//!   only the child just before its own (no herd) and re-checks on every
//!   event, so waiters acquire in FIFO order. A create whose reply was lost
//!   is found again by the uuid in its name.
//! - **Fence**: the creation zxid (`czxid`) of the holder's node. zxids are
//!   global to the ensemble and only grow, across restarts and leader
//!   changes; the sequence suffix does not (it restarts with a new parent).
//! - **Session**: every lock of the store is an ephemeral node of the
//!   store's one session (see `session.rs`). The server deletes them when
//!   the session expires; a lock is counted lost at the first
//!   disconnection after it was taken, since the holder then cannot know
//!   whether the server still has its session. A lock's TTL may not exceed
//!   the session timeout, so the holder's deadline never outlives the
//!   session.
//! - **TTL**: the store deletes a node whose TTL passed without renewal (a
//!   timer in the holder's process); renewal rewrites the node's data,
//!   which also proves the session alive. A holder whose process dies or
//!   stops loses its lock at the session timeout instead.
//! - **Semaphores** in the layout of Curator's `InterProcessSemaphoreV2`
//!   (a lease node per permit, taken under an internal lock; see
//!   `permits.rs`), so Curator and lockward share them.
//! - **Parents** are container nodes, which the server removes once empty.

#[cfg(feature = "zookeeper")]
mod core;
#[cfg(feature = "zookeeper")]
pub(crate) mod doctor;
#[cfg(feature = "zookeeper")]
mod held;
#[cfg(feature = "zookeeper")]
mod mutex;
#[cfg(feature = "zookeeper")]
pub mod paths;
#[cfg(feature = "zookeeper")]
mod permits;
#[cfg(feature = "zookeeper")]
mod queue;
#[cfg(feature = "zookeeper")]
mod records;
#[cfg(feature = "zookeeper")]
mod requests;
#[cfg(feature = "zookeeper")]
mod session;
#[cfg(all(feature = "zookeeper", feature = "bench"))]
pub mod side;
pub mod url;
#[cfg(feature = "zookeeper")]
pub use core::{ZookeeperBackend, CAPABILITIES};

pub use url::ZookeeperUrl;
