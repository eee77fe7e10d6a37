//! ZooKeeper's side client: creating (and deleting) an ephemeral node as
//! the floor, `mntr`'s approximate data size as the size. It connects as
//! the store does (digest credentials, the same ACLs).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use zookeeper_client::{Acls, CreateMode};

use super::doctor::four_letter;
use super::session::{acls, unavailable, Session};
use super::url::ZookeeperUrl;
use crate::backend::side_client::{ServerBytes, SideClient};
use crate::error::Result;
use crate::owner::OwnerId;
use crate::url_parts::Endpoint;

/// A session of its own on the ensemble.
pub struct ZookeeperSide {
    session: Session,
    acls: Acls<'static>,
    path: String,
    first: Option<Endpoint>,
    address: String,
}

impl ZookeeperSide {
    /// Connects to the ensemble of `url`.
    ///
    /// Cancellation: dropping the future closes the session being opened.
    pub async fn connect(url: &ZookeeperUrl) -> Result<ZookeeperSide> {
        let address = url.to_string();
        Ok(ZookeeperSide {
            session: Session::connect(url, address.clone()).await?,
            acls: acls(url),
            path: format!("/lockward-bench-floor-{}", OwnerId::random()),
            first: url.endpoints.first().cloned(),
            address,
        })
    }
}

#[async_trait]
impl SideClient for ZookeeperSide {
    /// The create alone is timed; the delete follows untimed.
    async fn floor_round_trip(&mut self) -> Result<Duration> {
        let (client, _) = self.session.client();
        let opts = CreateMode::Ephemeral.with_acls(self.acls);
        let began = Instant::now();
        let created = client.create(&self.path, b"", &opts).await;
        let took = began.elapsed();
        created.map_err(|e| unavailable(&self.address, &e))?;
        let deleted = client.delete(&self.path, None).await;
        deleted.map_err(|e| unavailable(&self.address, &e))?;
        Ok(took)
    }

    /// `None` when the server does not allow `mntr`.
    async fn server_bytes(&mut self) -> Result<Option<ServerBytes>> {
        let Some(e) = &self.first else {
            return Ok(None);
        };
        let mntr = four_letter(&e.host, e.port, "mntr").await;
        Ok(mntr
            .lines()
            .find_map(|l| l.strip_prefix("zk_approximate_data_size"))
            .and_then(|v| v.trim().parse().ok())
            .map(|bytes| ServerBytes {
                bytes,
                what: "zk_approximate_data_size",
            }))
    }
}
