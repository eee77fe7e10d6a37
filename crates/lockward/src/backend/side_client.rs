//! The side client's seam, below both the dispatch (`backend/side.rs`) and
//! each backend's side client (`backend/<name>/side.rs`): a plain client of
//! a store's server for measurements that need the server itself.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;

/// How big the server is, in bytes, and what was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerBytes {
    /// Bytes.
    pub bytes: u64,
    /// What was read, e.g. `"used_memory"`.
    pub what: &'static str,
}

/// A plain client of a store's server.
#[async_trait]
pub trait SideClient: Send {
    /// Times one round trip of the server's cheapest write, with the same
    /// kind of client lockward uses (Redis `SET`, etcd put, ZooKeeper
    /// create, PostgreSQL `SELECT 1`; on Kubernetes a Lease `GET`, which
    /// every lock operation starts with).
    ///
    /// Cancelling it may leave the write done; it touches only a key of its
    /// own.
    async fn floor_round_trip(&mut self) -> Result<Duration>;

    /// The server's size now, when it says (`None` otherwise).
    async fn server_bytes(&mut self) -> Result<Option<ServerBytes>>;

    /// Server bytes per bare key of the store's plain lock, measured by
    /// writing `n` such keys under `prefix` and deleting them again: what a
    /// lockward lock's memory is compared with. `None` where the store has
    /// no plain lock to compare with (all but Redis).
    async fn bare_lock_bytes(&mut self, _prefix: &str, _n: usize) -> Result<Option<f64>> {
        Ok(None)
    }
}
