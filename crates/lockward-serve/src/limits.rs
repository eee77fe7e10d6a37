//! The `lockward.v1.Limits` service: rate limits shared by every instance.

use std::time::Duration;

use lockward::recipe::{Decision, FixedWindow, Gcra};
use tonic::{Request, Response, Status};

use crate::errors::{invalid, status_of};
use crate::millis;
use crate::pb::{self, limits_server::Limits};
use crate::service::Service;

#[tonic::async_trait]
impl Limits for Service {
    async fn check(
        &self,
        request: Request<pb::CheckRequest>,
    ) -> Result<Response<pb::CheckResponse>, Status> {
        let request = request.into_inner();
        let algorithm = pb::Algorithm::try_from(request.algorithm)
            .map_err(|_| invalid("algorithm: unknown"))?;
        let store = self.store().clone();
        let period = Duration::from_millis(request.period_ms);
        let decided = match algorithm {
            pb::Algorithm::FixedWindow => {
                let limit = FixedWindow::new(store, request.name, request.limit, period)
                    .map_err(|e| status_of(&e))?;
                limit.check(&request.subject).await
            }
            pb::Algorithm::Gcra => {
                let limit = Gcra::new(store, request.name, request.limit, period, request.burst)
                    .map_err(|e| status_of(&e))?;
                limit.check(&request.subject).await
            }
        };
        let answer = match decided.map_err(|e| status_of(&e))? {
            Decision::Allowed { remaining } => pb::CheckResponse {
                allowed: true,
                remaining,
                retry_after_ms: 0,
            },
            Decision::Limited { retry_after } => pb::CheckResponse {
                allowed: false,
                remaining: 0,
                retry_after_ms: millis(retry_after),
            },
        };
        Ok(Response::new(answer))
    }
}
