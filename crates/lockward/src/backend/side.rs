//! A store's side client: a plain client of its server beside the lock
//! backend, for measurements that need the server itself (the floor of one
//! round trip, the server's size). Each backend implements it in its folder
//! (`backend/<name>/side.rs`); `lockward bench` and the benchmarks use it.

pub use super::side_client::{ServerBytes, SideClient};
use crate::error::Result;
use crate::url::StoreUrl;

/// A side client on the server of `url`; `None` for the embedded stores
/// (and for stores this build does not include).
///
/// Dropping the future cancels the connection attempt.
///
/// Cancellation: dropping the future drops the connection attempt.
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
        #[cfg(feature = "mysql")]
        StoreUrl::Mysql(m) => Some(Box::new(super::mysql::side::MysqlSide::connect(m).await?)),
        #[cfg(feature = "kubernetes")]
        StoreUrl::Kubernetes(k) => Some(Box::new(
            super::kubernetes::side::KubernetesSide::connect(k).await?,
        )),
        _ => None,
    })
}
