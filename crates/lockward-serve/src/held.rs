//! How a lease stream's first message is taken: a lock (or several), a
//! reader's share or a writer's side, permits, a leadership, or an
//! idempotency key's claim, each held as a [`Held`].

use std::future::Future;
use std::time::Duration;

use lockward::recipe::{Begun, Candidate, ElectionConfig, Held, Idempotency, Leadership, Wanted};
use lockward::{LockOptions, Renewal, Store};
use tonic::Status;

use crate::errors::{invalid, status_of};
use crate::pb::{self, lease_event::Event};

/// How long a run-once job's record is kept on stores that cannot keep it
/// forever, as `lockward once` keeps it.
const LONGEST: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// What the stream's first message got: something held, or an answer that
/// ends the stream (an idempotency key's stored result, or "in progress").
pub(crate) enum Taken {
    Held(Box<Held>),
    Answer(Event),
}

/// Takes what the stream's first message asks for on `store` (the caller
/// checked the message opens a stream of its service).
pub(crate) async fn take(
    store: &Store,
    first: &pb::lease_request::Request,
) -> Result<Taken, Status> {
    use pb::lease_request::Request;
    let taken = match first {
        Request::Acquire(acquire) => acquire_lock(store, acquire)
            .await
            .map(|held| Taken::Held(Box::new(held))),
        Request::Campaign(campaign) => lead(store, campaign)
            .await
            .map(|l| Taken::Held(Box::new(Held::Leader(l)))),
        Request::Claim(claim) => claim_key(store, claim).await,
        _ => return Err(invalid("a stream starts with what it asks for")),
    };
    taken.map_err(|e| status_of(&e))
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
    with_wait(opts, acquire.wait_ms)
}

/// `opts` waiting as `wait_ms` says (absent: while the stream lives), and
/// whether it only tries (0).
fn with_wait(opts: LockOptions, wait_ms: Option<u64>) -> (LockOptions, bool) {
    match wait_ms {
        Some(0) => (opts, true),
        Some(ms) => (opts.wait(Duration::from_millis(ms)), false),
        None => (opts.wait_forever(), false),
    }
}

/// Takes the lock(s), reader's share, writer's side or permits an Acquire
/// asks for.
async fn acquire_lock(store: &Store, acquire: &pb::Acquire) -> lockward::Result<Held> {
    let (opts, try_only) = options(acquire);
    let kind =
        pb::Kind::try_from(acquire.kind).map_err(|_| refused("kind", "unknown kind of lease"))?;
    let one = || match acquire.names.as_slice() {
        [name] => Ok(name.as_str()),
        [] => Err(refused("names", "give the lock's name")),
        _ => Err(refused(
            "names",
            "several names are taken together only as exclusive locks",
        )),
    };
    let wanted = match kind {
        pb::Kind::Exclusive if acquire.names.is_empty() => {
            return Err(refused("names", "give the lock's name"))
        }
        pb::Kind::Exclusive => Wanted::Locks(&acquire.names),
        pb::Kind::Shared => Wanted::Read(one()?),
        pb::Kind::Writer => Wanted::Write(one()?),
        pb::Kind::Permits => Wanted::Permits {
            semaphore: one()?,
            permits: acquire.permits,
            take: acquire.take.max(1),
        },
    };
    Held::take(store, wanted, &opts, try_only).await
}

/// A request lockward refuses, with what was wrong.
fn refused(what: &'static str, why: &str) -> lockward::Error {
    lockward::Error::InvalidArgument {
        what,
        why: why.to_string(),
    }
}

/// `ms`, or `default` when 0.
fn or_default(ms: u64, default: Duration) -> Duration {
    if ms == 0 {
        default
    } else {
        Duration::from_millis(ms)
    }
}

/// Campaigns until this candidate leads (or its wait runs out).
async fn lead(store: &Store, campaign: &pb::Campaign) -> lockward::Result<Leadership> {
    let defaults = ElectionConfig::default();
    let config = ElectionConfig {
        lease_duration: or_default(campaign.lease_ms, defaults.lease_duration),
        renew_deadline: or_default(campaign.renew_deadline_ms, defaults.renew_deadline),
        retry_period: or_default(campaign.retry_ms, defaults.retry_period),
    };
    if campaign.identity.is_empty() {
        return Err(refused(
            "identity",
            "give the candidate's identity (observers see it as the leader)",
        ));
    }
    let candidate = Candidate::new(
        store.clone(),
        campaign.election.as_str(),
        campaign.identity.as_str(),
        config,
    )?
    .renewed_by_caller();
    match campaign.wait_ms {
        Some(0) => candidate.try_campaign().await,
        Some(ms) => within(&campaign.election, ms, candidate.campaign()).await,
        None => candidate.campaign().await,
    }
}

/// `work`, or [`lockward::Error::TimedOut`] after `ms`.
async fn within<T>(
    name: &str,
    ms: u64,
    work: impl Future<Output = lockward::Result<T>>,
) -> lockward::Result<T> {
    let waited = Duration::from_millis(ms);
    tokio::time::timeout(waited, work)
        .await
        .unwrap_or_else(|_| {
            Err(lockward::Error::TimedOut {
                name: name.to_string(),
                waited,
            })
        })
}

/// The idempotency keys a Claim names.
fn keys(store: &Store, claim: &pb::Claim) -> lockward::Result<Idempotency> {
    let mut keys = Idempotency::new(store.clone());
    if !claim.namespace.is_empty() {
        keys = keys.namespace(claim.namespace.as_str());
    }
    let keep = pb::Keep::try_from(claim.keep)
        .map_err(|_| refused("keep", "unknown way of keeping a result"))?;
    Ok(match keep {
        pb::Keep::For if claim.keep_ms > 0 => keys.retention(Duration::from_millis(claim.keep_ms)),
        pb::Keep::For => keys,
        pb::Keep::Forever => keys.permanent(),
        pb::Keep::Longest if store.capabilities().permanent_records => keys.permanent(),
        pb::Keep::Longest => keys.retention(LONGEST),
    })
}

/// Claims a key, or answers with its stored result or "in progress".
async fn claim_key(store: &Store, claim: &pb::Claim) -> lockward::Result<Taken> {
    let mut opts = LockOptions::new().renewal(Renewal::Off);
    if claim.ttl_ms > 0 {
        opts = opts.ttl(Duration::from_millis(claim.ttl_ms));
    }
    if !claim.label.is_empty() {
        opts = opts.label(claim.label.clone());
    }
    let (opts, _) = with_wait(opts, claim.wait_ms.filter(|ms| *ms > 0));
    let keys = keys(store, claim)?.lock_options(opts).waiting(claim.wait);
    Ok(match keys.begin(&claim.key).await? {
        Begun::Claimed(claim) => Taken::Held(Box::new(Held::Claim(claim))),
        Begun::Stored(result) => Taken::Answer(Event::Stored(pb::Stored { result })),
        Begun::InProgress => Taken::Answer(Event::InProgress(pb::InProgress {})),
    })
}

/// The stored result of a key (Keys.Result).
pub(crate) async fn result(
    store: &Store,
    request: &pb::ResultRequest,
) -> Result<Option<String>, Status> {
    let claim = pb::Claim {
        key: request.key.clone(),
        namespace: request.namespace.clone(),
        ..Default::default()
    };
    let keys = keys(store, &claim).map_err(|e| status_of(&e))?;
    keys.result(&request.key).await.map_err(|e| status_of(&e))
}
