//! The client path through `lockward serve`: a daemon in the client's own
//! process (as a sidecar runs beside its service) and a lease that is a
//! gRPC stream the client renews, its deadline counted from the client's
//! own send time, as every client of the API must.

use std::time::{Duration, Instant};

use lockward::Store;
use lockward_serve::pb::lease_event::Event;
use lockward_serve::pb::lease_request::Request;
use lockward_serve::pb::locks_client::LocksClient;
use lockward_serve::pb::{self, Acquire, LeaseRequest, Release, Renew};
use lockward_serve::{Listen, Service};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::history::Outcome;

/// Starts a daemon on `store` on a free loopback port, for the rest of
/// the process, and connects to it.
pub async fn start_daemon(store: Store) -> Result<Channel, String> {
    let listen = Listen::parse("127.0.0.1:0").map_err(|e| e.to_string())?;
    let bound = listen.bind().await.map_err(|e| e.to_string())?;
    let address = bound.local_addr().ok_or("the daemon has no TCP address")?;
    tokio::spawn(bound.serve(Service::new(store), std::future::pending()));
    Channel::from_shared(format!("http://{address}"))
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| e.to_string())
}

/// A lease held through the daemon, renewed in the background every third
/// of its TTL until released or lost.
pub struct ServedLease {
    release: oneshot::Sender<oneshot::Sender<bool>>,
}

impl ServedLease {
    /// Takes `name` for `ttl`, waiting up to `wait`: its fence and its
    /// deadline (the send time of the request plus the remaining time the
    /// daemon granted).
    pub async fn acquire(
        channel: &Channel,
        name: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<(u64, Instant, ServedLease), Outcome> {
        let (requests, received) = mpsc::channel(4);
        let asked = Instant::now();
        let first = Request::Acquire(Acquire {
            names: vec![name.to_owned()],
            ttl_ms: millis(ttl),
            wait_ms: Some(millis(wait)),
            ..Default::default()
        });
        requests
            .send(LeaseRequest {
                request: Some(first),
            })
            .await
            .map_err(|_| Outcome::Failed)?;
        let mut events = LocksClient::new(channel.clone())
            .lease(ReceiverStream::new(received))
            .await
            .map_err(|s| outcome_of(&s))?
            .into_inner();
        let granted = match events.message().await {
            Ok(Some(pb::LeaseEvent {
                event: Some(Event::Granted(g)),
            })) => g,
            Ok(_) => return Err(Outcome::Indeterminate),
            Err(status) => return Err(outcome_of(&status)),
        };
        let deadline = asked + Duration::from_millis(granted.remaining_ms);
        let (release, released) = oneshot::channel();
        tokio::spawn(renew(requests, events, ttl, released));
        Ok((granted.fence, deadline, ServedLease { release }))
    }

    /// Releases; whether the daemon confirmed it (not when the lease was
    /// lost first).
    pub async fn release(self) -> bool {
        let (answer, answered) = oneshot::channel();
        if self.release.send(answer).is_err() {
            return false;
        }
        answered.await.unwrap_or(false)
    }
}

/// Renews every third of `ttl` until asked to release (answering whether
/// the daemon confirmed it) or until the lease is lost.
///
/// Cancellation: dropping the task drops the stream, which the daemon
/// takes as a release.
async fn renew(
    requests: mpsc::Sender<LeaseRequest>,
    mut events: tonic::Streaming<pb::LeaseEvent>,
    ttl: Duration,
    mut released: oneshot::Receiver<oneshot::Sender<bool>>,
) {
    let mut every = tokio::time::interval_at(tokio::time::Instant::now() + ttl / 3, ttl / 3);
    let mut next_id = 0;
    let send = |request| {
        requests.try_send(LeaseRequest {
            request: Some(request),
        })
    };
    loop {
        tokio::select! {
            _ = every.tick() => {
                next_id += 1;
                let renewal = Request::Renew(Renew { ttl_ms: millis(ttl), id: next_id });
                if send(renewal).is_err() {
                    return;
                }
            }
            answer = &mut released => {
                let Ok(answer) = answer else { return };
                if send(Request::Release(Release {})).is_err() {
                    let _ = answer.send(false);
                    return;
                }
                // Renewals answered meanwhile come first; then Released,
                // or Lost if the lease lapsed before the release.
                loop {
                    match events.message().await {
                        Ok(Some(pb::LeaseEvent { event: Some(Event::Released(_)) })) => {
                            let _ = answer.send(true);
                            return;
                        }
                        Ok(Some(pb::LeaseEvent { event: Some(Event::Renewed(_) | Event::RenewFailed(_)) })) => {}
                        _ => {
                            let _ = answer.send(false);
                            return;
                        }
                    }
                }
            }
            event = events.message() => match event {
                // A naive client: it writes on, trusting its lock, and the
                // register's fence check is what must refuse it.
                Ok(Some(pb::LeaseEvent { event: Some(Event::Renewed(_) | Event::RenewFailed(_)) })) => {}
                // Lost, or the stream ended: nothing more to renew.
                _ => return,
            },
        }
    }
}

/// How a refused request counts: surely not held when the daemon refused
/// or timed out; otherwise perhaps.
fn outcome_of(status: &tonic::Status) -> Outcome {
    match status.code() {
        tonic::Code::Aborted
        | tonic::Code::DeadlineExceeded
        | tonic::Code::InvalidArgument
        | tonic::Code::FailedPrecondition => Outcome::Failed,
        _ => Outcome::Indeterminate,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
