//! One lease over one stream: the client's Acquire, the wait, Granted, then
//! the client's renewals and release, and Lost whenever the store says the
//! lease is gone. The server never renews on the client's behalf: a client
//! that stops renewing (frozen, cut off) loses its lease at its TTL, as an
//! in-process holder would.

use std::time::{Duration, Instant};

use lockward::recipe::{MultiGuard, Permit, ReadGuard, RwLock, Semaphore};
use lockward::{Guard, LockOptions, LostReason, LostSignal, Renewal, Store};
use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};

use crate::errors::{invalid, status_of};
use crate::millis;
use crate::pb::{self, lease_event::Event, lease_request::Request};

/// Where the handler sends what the client receives.
pub(crate) type Events = mpsc::Sender<Result<pb::LeaseEvent, Status>>;

/// What one stream holds.
enum Held {
    Lock(Guard),
    All(MultiGuard),
    Read(ReadGuard),
    Permits(Permit),
}

impl Held {
    fn fences(&self) -> Vec<u64> {
        match self {
            Held::Lock(g) => vec![g.fence()],
            Held::All(all) => all.guards().iter().map(Guard::fence).collect(),
            Held::Read(r) => vec![r.fence()],
            Held::Permits(p) => vec![p.guard().fence()],
        }
    }

    fn guards(&self) -> Vec<&Guard> {
        match self {
            Held::Lock(g) => vec![g],
            Held::All(all) => all.guards().iter().collect(),
            Held::Read(r) => vec![r.guard()],
            Held::Permits(p) => vec![p.guard()],
        }
    }

    fn deadline(&self) -> Instant {
        self.guards()
            .iter()
            .map(|g| g.deadline())
            .min()
            .unwrap_or_else(Instant::now)
    }

    fn lost_signal(&self) -> LostSignal {
        match self {
            Held::Lock(g) => g.lost_signal(),
            Held::All(all) => all.lost_signal(),
            Held::Read(r) => r.lost_signal(),
            Held::Permits(p) => p.guard().lost_signal(),
        }
    }

    /// Extends every lock held to `ttl` (`None`: the TTL it had).
    async fn extend(&self, ttl: Option<Duration>) -> lockward::Result<()> {
        for guard in self.guards() {
            guard.extend(ttl).await?;
        }
        Ok(())
    }

    async fn release(self) -> lockward::Result<()> {
        match self {
            Held::Lock(g) => g.release().await,
            Held::All(all) => all.release().await,
            Held::Read(r) => r.release().await,
            Held::Permits(p) => p.release().await,
        }
    }
}

/// The options of an Acquire, and whether it only tries.
fn options(acquire: &pb::Acquire) -> (LockOptions, bool) {
    // The client renews; the server never does.
    let mut opts = LockOptions::new().renewal(Renewal::Off);
    if acquire.ttl_ms > 0 {
        opts = opts.ttl(Duration::from_millis(acquire.ttl_ms));
    }
    if acquire.lock_delay_ms > 0 {
        opts = opts.lock_delay(Duration::from_millis(acquire.lock_delay_ms));
    }
    if !acquire.label.is_empty() {
        opts = opts.label(acquire.label.clone());
    }
    match acquire.wait_ms {
        Some(0) => (opts, true),
        Some(ms) => (opts.wait(Duration::from_millis(ms)), false),
        None => (opts.wait_forever(), false),
    }
}

/// Takes what `acquire` asks for on `store`.
async fn take(store: &Store, acquire: &pb::Acquire) -> Result<Held, Status> {
    let (opts, try_only) = options(acquire);
    let kind = pb::Kind::try_from(acquire.kind).map_err(|_| invalid("kind: unknown"))?;
    let one = || match acquire.names.as_slice() {
        [name] => Ok(name.as_str()),
        [] => Err(invalid("names: give the lock's name")),
        _ => Err(invalid(
            "names: several names are taken together only as exclusive locks",
        )),
    };
    let held = match kind {
        pb::Kind::Exclusive if acquire.names.len() > 1 => {
            let names = &acquire.names;
            let all = if try_only {
                store.try_acquire_all(names, &opts).await
            } else {
                store.acquire_all(names, &opts).await
            };
            all.map(Held::All)
        }
        pb::Kind::Exclusive => {
            let name = one()?;
            let guard = if try_only {
                store.try_acquire(name, &opts).await
            } else {
                store.acquire(name, &opts).await
            };
            guard.map(Held::Lock)
        }
        pb::Kind::Shared => {
            let lock = RwLock::new(store.clone(), one()?).map_err(|e| status_of(&e))?;
            let reader = if try_only {
                lock.try_read(&opts).await
            } else {
                lock.read(&opts).await
            };
            reader.map(Held::Read)
        }
        pb::Kind::Permits => {
            let semaphore = Semaphore::new(store.clone(), one()?, acquire.permits)
                .map_err(|e| status_of(&e))?;
            let take = acquire.take.max(1);
            let permit = if try_only {
                semaphore.try_acquire_many(take, &opts).await
            } else {
                semaphore.acquire_many(take, &opts).await
            };
            permit.map(Held::Permits)
        }
    };
    held.map_err(|e| status_of(&e))
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
    store: Store,
    mut requests: Streaming<pb::LeaseRequest>,
    events: Events,
    mut stopping: watch::Receiver<bool>,
) {
    let first = requests.message().await;
    let received = Instant::now();
    let acquire = match first {
        Ok(Some(pb::LeaseRequest {
            request: Some(Request::Acquire(acquire)),
        })) => acquire,
        Ok(Some(_)) => {
            let _ = events
                .send(Err(invalid("a lease starts with an Acquire")))
                .await;
            return;
        }
        // The client went away before asking.
        Ok(None) | Err(_) => return,
    };
    // Waiting, and watching the stream: a client that leaves (or says
    // anything) while it waits ends the wait, and nothing is held.
    let held = tokio::select! {
        held = take(&store, &acquire) => held,
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
    let held = match held {
        Ok(held) => held,
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
                Ok(Some(_)) => {
                    let _ = events.send(Err(invalid("a lease is asked for once"))).await;
                    return;
                }
                // The client went away without releasing: released now.
                Ok(None) | Err(_) => return,
            }
        }
    }
}
