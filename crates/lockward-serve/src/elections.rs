//! The `lockward.v1.Elections` service: candidacies as lease streams, and
//! who leads.

use std::pin::Pin;

use futures_util::Stream;
use lockward::recipe::{Candidate, ElectionConfig};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::errors::status_of;
use crate::lease::Opening;
use crate::pb::{self, elections_server::Elections};
use crate::service::{Events, Service};

/// An observer of `election`: a candidate that never campaigns.
fn observer(service: &Service, election: &str) -> Result<Candidate, Status> {
    Candidate::new(
        service.store().clone(),
        election,
        "observer",
        ElectionConfig::default(),
    )
    .map_err(|e| status_of(&e))
}

type Leaders = Pin<Box<dyn Stream<Item = Result<pb::LeaderResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Elections for Service {
    type CampaignStream = Events;
    type ObserveStream = Leaders;

    async fn campaign(
        &self,
        request: Request<Streaming<pb::LeaseRequest>>,
    ) -> Result<Response<Events>, Status> {
        self.lease_stream(Opening::Campaign, request.into_inner())
    }

    async fn leader(
        &self,
        request: Request<pb::LeaderRequest>,
    ) -> Result<Response<pb::LeaderResponse>, Status> {
        let candidate = observer(self, &request.into_inner().election)?;
        let identity = candidate.leader().await.map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::LeaderResponse { identity }))
    }

    async fn observe(
        &self,
        request: Request<pb::LeaderRequest>,
    ) -> Result<Response<Leaders>, Status> {
        let candidate = observer(self, &request.into_inner().election)?;
        let (leaders, received) = mpsc::channel(4);
        tokio::spawn(async move {
            let mut last = match candidate.leader().await {
                Ok(now) => now,
                Err(e) => {
                    let _ = leaders.send(Err(status_of(&e))).await;
                    return;
                }
            };
            let now = pb::LeaderResponse {
                identity: last.clone(),
            };
            if leaders.send(Ok(now)).await.is_err() {
                return;
            }
            loop {
                let change = tokio::select! {
                    change = candidate.next_leader_change(last.as_deref()) => change,
                    // The observer left: stop watching at once.
                    _ = leaders.closed() => return,
                };
                let sent = match change {
                    Ok(now) => {
                        last = now.clone();
                        leaders.send(Ok(pb::LeaderResponse { identity: now })).await
                    }
                    Err(e) => {
                        let _ = leaders.send(Err(status_of(&e))).await;
                        return;
                    }
                };
                if sent.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(received))))
    }
}
