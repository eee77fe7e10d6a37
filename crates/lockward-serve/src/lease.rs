//! One lease over one stream: the client's Acquire, the wait, Granted, then
//! the client's renewals and release, and Lost whenever the store says the
//! lease is gone. The server never renews on the client's behalf: a client
//! that stops renewing (frozen, cut off) loses its lease at its TTL, as an
//! in-process holder would. Granted carries how long the daemon waited and
//! how long is left, so the client's deadline counts from its own request
//! (the model `crates/lockward-models/src/lease_deadline.rs` checks it).

use std::time::{Duration, Instant};

use lockward::recipe::Held;
use lockward::{LostReason, Store};
use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};

use crate::errors::{invalid, status_of};
use crate::held::{take, Taken};
use crate::millis;
use crate::pb::{self, lease_event::Event, lease_request::Request};

/// Where the handler sends what the client receives.
pub(crate) type Events = mpsc::Sender<Result<pb::LeaseEvent, Status>>;

/// The message a service's streams open with.
#[derive(Clone, Copy)]
pub(crate) enum Opening {
    /// Locks.Lease.
    Acquire,
    /// Elections.Campaign.
    Campaign,
    /// Keys.Claim.
    Claim,
}

impl Opening {
    fn opens(self, request: &Request) -> bool {
        matches!(
            (self, request),
            (Opening::Acquire, Request::Acquire(_))
                | (Opening::Campaign, Request::Campaign(_))
                | (Opening::Claim, Request::Claim(_))
        )
    }

    fn refusal(self) -> Status {
        invalid(match self {
            Opening::Acquire => "a lease starts with an Acquire",
            Opening::Campaign => "a candidacy starts with a Campaign",
            Opening::Claim => "a claim starts with a Claim",
        })
    }
}

fn lost_event(reason: LostReason) -> pb::LeaseEvent {
    let code = match reason {
        LostReason::Expired => pb::LostReason::Expired,
        LostReason::TakenOver => pb::LostReason::TakenOver,
        LostReason::SessionEnded => pb::LostReason::SessionEnded,
        LostReason::ForcedUnlock => pb::LostReason::ForcedUnlock,
    };
    event(Event::Lost(pb::Lost {
        reason: code as i32,
        message: reason.to_string(),
    }))
}

fn event(event: Event) -> pb::LeaseEvent {
    pb::LeaseEvent { event: Some(event) }
}

/// Serves one lease stream: `requests` from the client, `events` to it.
///
/// Cancellation: dropping the future (the server shutting down) drops what
/// it holds, which releases it in the background.
pub(crate) async fn serve(
    opening: Opening,
    first_within: Duration,
    store: Store,
    mut requests: Streaming<pb::LeaseRequest>,
    events: Events,
    mut stopping: watch::Receiver<bool>,
) {
    // A stream that never says what it wants must not keep a task forever.
    let Ok(first) = tokio::time::timeout(first_within, requests.message()).await else {
        let _ = events
            .send(Err(invalid(format!(
                "nothing asked within {first_within:?} of opening the stream"
            ))))
            .await;
        return;
    };
    let received = Instant::now();
    let first = match first {
        Ok(Some(pb::LeaseRequest {
            request: Some(request),
        })) if opening.opens(&request) => request,
        Ok(Some(_)) => {
            let _ = events.send(Err(opening.refusal())).await;
            return;
        }
        // The client went away before asking.
        Ok(None) | Err(_) => return,
    };
    // Waiting, and watching the stream: a client that leaves (or says
    // anything) while it waits ends the wait, and nothing is held.
    let taken = tokio::select! {
        taken = take(&store, &first) => taken,
        _ = until_stopped(&mut stopping) => {
            let _ = events.send(Err(stopped())).await;
            return;
        }
        message = requests.message() => {
            if let Ok(Some(_)) = message {
                let _ = events.send(Err(invalid("nothing but the Acquire until Granted"))).await;
            }
            return;
        }
    };
    let held = match taken {
        Ok(Taken::Held(held)) => *held,
        Ok(Taken::Answer(answer)) => {
            let _ = events.send(Ok(event(answer))).await;
            return;
        }
        Err(status) => {
            let _ = events.send(Err(status)).await;
            return;
        }
    };
    let now = Instant::now();
    let fences = held.fences();
    let granted = event(Event::Granted(pb::Granted {
        fence: fences[0],
        fences,
        remaining_ms: millis(held.deadline().saturating_duration_since(now)),
        waited_ms: millis(now.saturating_duration_since(received)),
    }));
    if events.send(Ok(granted)).await.is_err() {
        return;
    }
    keep(held, requests, events, stopping).await;
}

/// Resolves when the server begins to stop.
async fn until_stopped(stopping: &mut watch::Receiver<bool>) {
    // The borrow the wait returns is dropped here, not held across awaits.
    let _ = stopping.wait_for(|stop| *stop).await.map(|_| ());
}

/// Why a stream ends when the server stops.
fn stopped() -> Status {
    crate::errors::status(
        tonic::Code::Unavailable,
        "the daemon is stopping; its leases were released".into(),
        "Unavailable",
    )
}

/// Leaves the locks taken with a lock-delay to run out in the store
/// instead of releasing them when `held` is dropped: their client stopped
/// without a release (its lease lapsed, or it went away), so it may still
/// be acting, and the lock-delay is what it asked for then.
fn keep_lock_delays(held: &Held) {
    for guard in held.guards() {
        if !guard.lock_delay().is_zero() {
            guard.abandon();
        }
    }
}

/// After the grant: renewals and the release from the client, Lost from
/// the store. Returns when the lease ended; what is still held then is
/// dropped, which releases it.
async fn keep(
    held: Held,
    mut requests: Streaming<pb::LeaseRequest>,
    events: Events,
    mut stopping: watch::Receiver<bool>,
) {
    let mut lost = held.lost_signal();
    loop {
        tokio::select! {
            _ = until_stopped(&mut stopping) => {
                let _ = held.release().await;
                let _ = events.send(Err(stopped())).await;
                return;
            }
            reason = lost.wait() => {
                let _ = events.send(Ok(lost_event(reason))).await;
                keep_lock_delays(&held);
                return;
            }
            message = requests.message() => match message {
                Ok(Some(pb::LeaseRequest { request: Some(Request::Renew(renew)) })) => {
                    let ttl = (renew.ttl_ms > 0).then(|| Duration::from_millis(renew.ttl_ms));
                    match held.extend(ttl).await {
                        Ok(()) => {
                            let left = held.deadline().saturating_duration_since(Instant::now());
                            let renewed = event(Event::Renewed(pb::Renewed {
                                remaining_ms: millis(left),
                                id: renew.id,
                            }));
                            if events.send(Ok(renewed)).await.is_err() {
                                return;
                            }
                        }
                        Err(lockward::Error::Lost { reason, .. }) => {
                            let _ = events.send(Ok(lost_event(reason))).await;
                            return;
                        }
                        // A store that did not answer: the lease stands
                        // until its deadline, and the client may retry.
                        Err(e) => {
                            let failed = event(Event::RenewFailed(pb::RenewFailed {
                                kind: e.kind().to_string(),
                                message: e.to_string(),
                                id: renew.id,
                            }));
                            if events.send(Ok(failed)).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                Ok(Some(pb::LeaseRequest { request: Some(Request::Release(_)) })) => {
                    let answer = match held.release().await {
                        Ok(()) => Ok(event(Event::Released(pb::Released {}))),
                        Err(lockward::Error::Lost { reason, .. }) => Ok(lost_event(reason)),
                        Err(e) => Err(status_of(&e)),
                    };
                    let _ = events.send(answer).await;
                    return;
                }
                Ok(Some(pb::LeaseRequest { request: Some(Request::Complete(complete)) })) => {
                    let Held::Claim(claim) = held else {
                        let _ = events.send(Err(invalid("only a claim is completed"))).await;
                        return;
                    };
                    let answer = match claim.complete(&complete.result).await {
                        Ok(()) => Ok(event(Event::Completed(pb::Completed {}))),
                        Err(lockward::Error::Lost { reason, .. }) => Ok(lost_event(reason)),
                        Err(e) => Err(status_of(&e)),
                    };
                    let _ = events.send(answer).await;
                    return;
                }
                Ok(Some(_)) => {
                    let _ = events.send(Err(invalid("a stream asks for what it holds once"))).await;
                    return;
                }
                // The client went away without releasing: released now,
                // but for the locks it asked to keep for a lock-delay.
                Ok(None) | Err(_) => {
                    keep_lock_delays(&held);
                    return;
                }
            }
        }
    }
}
