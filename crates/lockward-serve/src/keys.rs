//! The `lockward.v1.Keys` service: idempotency keys and run-once jobs,
//! claimed as lease streams.

use tonic::{Request, Response, Status, Streaming};

use crate::lease::Opening;
use crate::pb::{self, keys_server::Keys};
use crate::service::{Events, Service};

#[tonic::async_trait]
impl Keys for Service {
    type ClaimStream = Events;

    async fn claim(
        &self,
        request: Request<Streaming<pb::LeaseRequest>>,
    ) -> Result<Response<Events>, Status> {
        self.lease_stream(Opening::Claim, request.into_inner())
    }

    async fn result(
        &self,
        request: Request<pb::ResultRequest>,
    ) -> Result<Response<pb::ResultResponse>, Status> {
        let result = crate::held::result(self.store(), &request.into_inner()).await?;
        Ok(Response::new(pb::ResultResponse { result }))
    }
}
