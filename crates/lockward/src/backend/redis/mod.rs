//! `redis://` and `rediss://`: fenced locks on one Redis server, a Redis
//! Cluster or the primary Redis Sentinel names.
//!
//! - **Acquire**: one script sets the lock key `NX PX ttl` to the owner id
//!   and mints the fence as `max(counter + 1, server TIME in µs)` into a
//!   counter that never expires (see `lua/acquire.lua`; every script is
//!   built from the Lua files of `lua/`, one source for every client).
//! - **Release**: compare-and-delete, then `PUBLISH` on the name's channel.
//!   **Extend**: compare-and-`PEXPIRE`.
//! - **Waiting**: subscribe to the name's channel first, then re-check; wake
//!   on the publish, and also when the holder's PTTL runs out (an expiry
//!   publishes nothing).
//! - **Connections**: one multiplexed connection for commands and one RESP3
//!   connection for subscriptions, both managed: they reconnect after a
//!   server restart, and subscriptions are restored.
//! - **Semaphores**: kept natively, a sorted set of holders and a count
//!   changed by one script per step (see `permits.rs`).
//! - **Read-write locks**: native, readers in a sorted set beside the lock
//!   key, admitted by one script and waiting in the name's line with the
//!   writers (see `readers.rs`).
//! - **Redis Cluster** (`redis+cluster://`): the same scripts, with every key
//!   of a name in one hash slot; waiting uses the cluster's pub/sub.
//! - **Redis Sentinel** (`redis+sentinel://`): the same scripts on the
//!   primary the sentinels name, found again after a failover (see
//!   `sentinel.rs`); fences keep growing across it (see `lua/next_fence.lua`).
//! - **Replicas** (`replicas=N`): a grant or renewal is answered once N
//!   replicas confirm it (`WAIT`), else undone (see `replicas.rs`).
//!
//! Expiry is timed by Redis's clock (`PX`), so client clock skew does not
//! matter. Key names are documented in [`keys`].

#[cfg(feature = "redis")]
pub(crate) mod channels;
#[cfg(feature = "redis")]
mod client;
#[cfg(feature = "redis")]
pub(crate) mod codec;
#[cfg(feature = "redis")]
pub(crate) mod conn;
#[cfg(feature = "redis")]
mod core;
#[cfg(feature = "redis")]
pub(crate) mod doctor;
#[cfg(feature = "redis")]
pub mod keys;
#[cfg(feature = "redis")]
pub(crate) mod lua;
#[cfg(feature = "redis")]
mod mutex;
#[cfg(feature = "redis")]
mod permits;
#[cfg(feature = "redis")]
mod readers;
#[cfg(feature = "redis")]
mod records;
#[cfg(feature = "redis")]
mod replicas;
#[cfg(feature = "redis")]
mod scripts;
#[cfg(feature = "redis")]
mod sentinel;
#[cfg(all(feature = "redis", feature = "bench"))]
pub mod side;
#[cfg(feature = "redis")]
mod switch_master;
#[cfg(feature = "redis-tls")]
mod tls;
pub mod url;
#[cfg(feature = "redis")]
pub use core::{RedisBackend, CAPABILITIES};

pub use url::RedisUrl;
