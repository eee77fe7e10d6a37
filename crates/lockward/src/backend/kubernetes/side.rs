//! Kubernetes' side client: a Lease `GET` as the floor (every lock
//! operation reads its Lease first); the server's size is not exposed.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ObjectMeta, PostParams};

use super::url::KubernetesUrl;
use super::KubernetesBackend;
use crate::backend::side_client::{ServerBytes, SideClient};
use crate::error::Result;

/// The Lease the floor reads.
const FLOOR_LEASE: &str = "lockward-bench-floor";

/// A plain client of the API server, with the store's credentials.
pub struct KubernetesSide {
    backend: KubernetesBackend,
}

impl KubernetesSide {
    /// Connects to the API server of `url` and makes sure the Lease the
    /// floor reads exists.
    ///
    /// Dropping the future cancels the connection attempt.
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &KubernetesUrl) -> Result<KubernetesSide> {
        let backend = KubernetesBackend::connect(url).await?;
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(FLOOR_LEASE.to_string()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        match backend.leases.create(&PostParams::default(), &lease).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => return Err(backend.fail(e)),
        }
        Ok(KubernetesSide { backend })
    }
}

#[async_trait]
impl SideClient for KubernetesSide {
    async fn floor_round_trip(&mut self) -> Result<Duration> {
        let began = Instant::now();
        let got = self.backend.leases.get(FLOOR_LEASE).await;
        got.map_err(|e| self.backend.fail(e))?;
        Ok(began.elapsed())
    }

    async fn server_bytes(&mut self) -> Result<Option<ServerBytes>> {
        Ok(None)
    }
}
