//! etcd's side client: a put as the floor, the database space in use as
//! the size.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::url::EtcdUrl;
use crate::backend::side_client::{ServerBytes, SideClient};
use crate::error::{Error, Result};

/// A plain etcd client, with the store's credentials and TLS.
pub struct EtcdSide {
    client: etcd_client::Client,
    address: String,
}

impl EtcdSide {
    /// Connects to the cluster of `url`.
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &EtcdUrl) -> Result<EtcdSide> {
        Ok(EtcdSide {
            client: super::side_client(url).await?,
            address: url.to_string(),
        })
    }

    fn failed(&self, e: etcd_client::Error) -> Error {
        Error::Unavailable {
            address: self.address.clone(),
            message: e.to_string(),
            cause: None,
        }
    }
}

#[async_trait]
impl SideClient for EtcdSide {
    async fn floor_round_trip(&mut self) -> Result<Duration> {
        let began = Instant::now();
        let put = self.client.put("lockward-bench-floor", "1", None).await;
        put.map_err(|e| self.failed(e))?;
        Ok(began.elapsed())
    }

    async fn server_bytes(&mut self) -> Result<Option<ServerBytes>> {
        let status = self.client.status().await;
        let status = status.map_err(|e| self.failed(e))?;
        Ok(u64::try_from(status.raft_used_db_size())
            .ok()
            .map(|bytes| ServerBytes {
                bytes,
                what: "db size in use",
            }))
    }
}
