//! A store's side client: a plain client of its server beside the lock
//! backend, for measurements that need the server itself (the floor of one
//! round trip, the server's size). Each backend implements it in its folder
//! (`backend/<name>/side.rs`); `lockward bench` and the benchmarks use it.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::url::StoreUrl;

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
    /// create, PostgreSQL `SELECT 1`).
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

/// A side client on the server of `url`; `None` for the embedded stores
/// (and for stores this build does not include).
///
/// Dropping the future cancels the connection attempt.
pub async fn connect(url: &StoreUrl) -> Result<Option<Box<dyn SideClient>>> {
    Ok(match url {
        #[cfg(feature = "redis")]
        StoreUrl::Redis(r) => Some(Box::new(super::redis::side::RedisSide::connect(r).await?)),
        #[cfg(feature = "redis")]
        StoreUrl::Redlock(r) => Some(Box::new(super::redlock::side::connect(r).await?)),
        #[cfg(feature = "etcd")]
        StoreUrl::Etcd(e) => Some(Box::new(super::etcd::side::EtcdSide::connect(e).await?)),
        #[cfg(feature = "zookeeper")]
        StoreUrl::Zookeeper(z) => Some(Box::new(
            super::zookeeper::side::ZookeeperSide::connect(z).await?,
        )),
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(p) => Some(Box::new(
            super::postgres::side::PostgresSide::connect(p).await?,
        )),
        _ => None,
    })
}
