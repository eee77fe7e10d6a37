//! Fenced writes: resources that refuse writes carrying an older fencing
//! token than one they already accepted, so a holder that lost its lock
//! without knowing (a GC pause, a stopped VM) cannot overwrite the work of
//! the holder after it.
//!
//! A write is accepted when its fence is at least the fence of the last
//! accepted write for that key (equal: the same holder writing again), and
//! refused with [`Error::Stale`](crate::Error::Stale) otherwise. The check
//! and the write are one atomic step in the resource. This module ships the
//! check for the resources lockward can reach: an in-memory register,
//! SQLite, PostgreSQL and Redis. Implement [`FencedResource`] for your own.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use lockward::fence::{FencedResource, MemoryRegister};
//! let stock = MemoryRegister::new();
//! stock.write("sku-9", b"4", 34).await?;           // the current holder
//! let stale = stock.write("sku-9", b"5", 33).await; // a paused old holder
//! assert!(matches!(stale, Err(lockward::Error::Stale { current: 34, .. })));
//! assert_eq!(stock.read("sku-9").await?.unwrap().value, b"4");
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```
//!
//! Your own resource, for example a table you already have, implements the
//! trait with one conditional write:
//!
//! ```
//! use async_trait::async_trait;
//! use lockward::fence::{Fenced, FencedResource};
//! use std::{collections::HashMap, sync::Mutex};
//!
//! struct Ledger(Mutex<HashMap<String, Fenced>>);
//!
//! #[async_trait]
//! impl FencedResource for Ledger {
//!     async fn write(&self, key: &str, value: &[u8], fence: u64) -> lockward::Result<()> {
//!         let mut rows = self.0.lock().unwrap();
//!         match rows.get(key) {
//!             Some(row) if row.fence > fence => Err(lockward::Error::Stale {
//!                 key: key.into(), fence, current: row.fence,
//!             }),
//!             _ => {
//!                 rows.insert(key.into(), Fenced { value: value.to_vec(), fence });
//!                 Ok(())
//!             }
//!         }
//!     }
//!     async fn read(&self, key: &str) -> lockward::Result<Option<Fenced>> {
//!         Ok(self.0.lock().unwrap().get(key).cloned())
//!     }
//! }
//! ```

use async_trait::async_trait;

use crate::error::Result;

#[cfg(any(feature = "postgres", feature = "mysql"))]
mod claim_wait;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod db;
mod memory;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod pairs;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub use db::{Engine, FenceDb, GuardedTable, StoredFence, Unfenced};
pub use memory::MemoryRegister;
#[cfg(feature = "mysql")]
pub use mysql::MysqlRegister;
#[cfg(feature = "postgres")]
pub use postgres::PostgresRegister;
#[cfg(feature = "redis")]
pub use redis::RedisRegister;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteRegister;

/// A value with the fence of the write that stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fenced {
    /// The stored value.
    pub value: Vec<u8>,
    /// The fence it was written with.
    pub fence: u64,
}

/// A resource that checks fencing tokens on every write.
#[async_trait]
pub trait FencedResource: Send + Sync {
    /// Stores `value` under `key` if `fence` is at least the fence of the
    /// last accepted write (inserting when `key` is new); otherwise fails
    /// with [`Error::Stale`](crate::Error::Stale) and changes nothing.
    async fn write(&self, key: &str, value: &[u8], fence: u64) -> Result<()>;

    /// The last accepted value of `key`, with its fence.
    async fn read(&self, key: &str) -> Result<Option<Fenced>>;

    /// Raises the fence of `key` to `fence` without changing its value
    /// (an absent key is created empty), or fails with
    /// [`Error::Stale`](crate::Error::Stale) like a write.
    ///
    /// Call it right after taking the lock and before reading, for a
    /// read-modify-write: an old holder's write that lands after the claim
    /// is refused, and one that landed before it is seen by the read. Write
    /// fencing alone cannot stop the old holder's write from landing between
    /// the new holder's read and write, losing it. The default refuses: a
    /// resource must do this in one atomic step.
    async fn claim(&self, key: &str, fence: u64) -> Result<()> {
        let _ = (key, fence);
        Err(crate::Error::NotBuilt {
            scheme: "fence".into(),
            why: "this resource cannot raise a fence without a write".into(),
        })
    }
}
