//! Elections, idempotency keys and rate limits through a real daemon on a
//! SQLite store, as a client of any language sees them.

use lockward_serve::pb::{
    self, elections_client::ElectionsClient, keys_client::KeysClient, lease_event::Event,
    lease_request::Request, limits_client::LimitsClient,
};
use tonic::transport::Channel;

mod daemon;
use daemon::{kind, Daemon, Lease};

/// A campaign in the election "scheduler" with a lease of `lease_ms`,
/// which lapses unless the test renews.
fn timed_campaign(identity: &str, wait_ms: Option<u64>, lease_ms: u64) -> Request {
    Request::Campaign(pb::Campaign {
        election: "scheduler".into(),
        identity: identity.into(),
        lease_ms,
        renew_deadline_ms: lease_ms * 2 / 3,
        retry_ms: lease_ms / 5,
        wait_ms,
    })
}

/// A campaign with a lease of 1.5 s.
fn campaign(identity: &str, wait_ms: Option<u64>) -> Request {
    timed_campaign(identity, wait_ms, 1_500)
}

/// A campaign whose lease outlives the test: an observer polls SQLite every
/// two seconds (client-go's retry period) for leaders of other processes.
fn long_campaign(identity: &str, wait_ms: Option<u64>) -> Request {
    timed_campaign(identity, wait_ms, 60_000)
}

async fn leader(elections: &mut ElectionsClient<Channel>) -> Option<String> {
    let request = pb::LeaderRequest {
        election: "scheduler".into(),
    };
    elections
        .leader(request)
        .await
        .unwrap()
        .into_inner()
        .identity
}

#[tokio::test]
async fn one_candidate_leads_observers_see_each_change_and_a_resign_hands_over() {
    let daemon = Daemon::start().await;
    let mut elections = ElectionsClient::new(daemon.channel().await);
    let mut observer = elections
        .observe(pb::LeaderRequest {
            election: "scheduler".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = observer.message().await.unwrap().unwrap();
    assert_eq!(first.identity, None, "nobody leads yet");

    let mut a = Lease::open(long_campaign("node-a", None), |r| elections.campaign(r)).await;
    let epoch_a = a.granted().await.fence;
    assert_eq!(leader(&mut elections).await.as_deref(), Some("node-a"));
    let seen = observer.message().await.unwrap().unwrap();
    assert_eq!(seen.identity.as_deref(), Some("node-a"));

    let mut busy = Lease::open(long_campaign("node-b", Some(0)), |r| elections.campaign(r)).await;
    let refused = busy.next().await.expect_err("someone leads");
    assert_eq!(kind(&refused), "Busy");

    let mut b = Lease::open(long_campaign("node-b", None), |r| elections.campaign(r)).await;
    a.release().await;
    let epoch_b = b.granted().await.fence;
    assert!(epoch_b > epoch_a, "a new leader's epoch is larger");
    let mut seen = observer.message().await.unwrap().unwrap();
    // The observer may see the moment nobody led.
    if seen.identity.is_none() {
        seen = observer.message().await.unwrap().unwrap();
    }
    assert_eq!(seen.identity.as_deref(), Some("node-b"));
    b.release().await;
}

#[tokio::test]
async fn a_leader_that_stops_renewing_loses_its_lease_to_the_next_candidate() {
    let daemon = Daemon::start().await;
    let mut elections = ElectionsClient::new(daemon.channel().await);
    let mut quiet = Lease::open(campaign("node-a", None), |r| elections.campaign(r)).await;
    quiet.granted().await;
    // node-a sends no Renew: its lease of 1.5 s lapses, and the daemon,
    // which never renews for it, tells it so.
    let mut next = Lease::open(campaign("node-b", Some(5_000)), |r| elections.campaign(r)).await;
    next.granted().await;
    assert!(matches!(quiet.next().await, Ok(Event::Lost(_))));
    assert_eq!(leader(&mut elections).await.as_deref(), Some("node-b"));
}

#[tokio::test]
async fn a_campaign_without_an_identity_or_with_bad_timing_is_refused() {
    let daemon = Daemon::start().await;
    let mut elections = ElectionsClient::new(daemon.channel().await);
    let mut nameless = Lease::open(campaign("", None), |r| elections.campaign(r)).await;
    let refused = nameless.next().await.expect_err("no identity");
    assert_eq!(kind(&refused), "InvalidArgument");
    let backwards = Request::Campaign(pb::Campaign {
        election: "scheduler".into(),
        identity: "node-a".into(),
        lease_ms: 1_000,
        renew_deadline_ms: 2_000,
        ..Default::default()
    });
    let mut backwards = Lease::open(backwards, |r| elections.campaign(r)).await;
    let refused = backwards.next().await.expect_err("deadline past the lease");
    assert_eq!(kind(&refused), "InvalidArgument");
    assert!(refused.message().contains("renew deadline"), "{refused:?}");
    // A lock request on the elections' stream is refused too.
    let lock = Request::Acquire(pb::Acquire {
        names: vec!["x".into()],
        ..Default::default()
    });
    let mut wrong = Lease::open(lock, |r| elections.campaign(r)).await;
    assert_eq!(
        kind(&wrong.next().await.expect_err("not a campaign")),
        "InvalidArgument"
    );
}

fn claim(key: &str, wait: bool) -> Request {
    Request::Claim(pb::Claim {
        key: key.into(),
        ttl_ms: 5_000,
        wait,
        ..Default::default()
    })
}

#[tokio::test]
async fn a_key_runs_once_a_duplicate_gets_the_stored_result_or_in_progress() {
    let daemon = Daemon::start().await;
    let mut keys = KeysClient::new(daemon.channel().await);
    let mut first = Lease::open(claim("order-17", false), |r| keys.claim(r)).await;
    assert!(first.granted().await.fence > 0);
    let mut duplicate = Lease::open(claim("order-17", false), |r| keys.claim(r)).await;
    assert!(matches!(duplicate.next().await, Ok(Event::InProgress(_))));
    let mut waiting = Lease::open(claim("order-17", true), |r| keys.claim(r)).await;
    first
        .send(Request::Complete(pb::Complete {
            result: "charged 42.00".into(),
        }))
        .await;
    assert!(matches!(first.next().await, Ok(Event::Completed(_))));
    match waiting.next().await {
        Ok(Event::Stored(stored)) => assert_eq!(stored.result, "charged 42.00"),
        other => panic!("the waiter gets the result: {other:?}"),
    }
    let stored = keys
        .result(pb::ResultRequest {
            key: "order-17".into(),
            namespace: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stored.result.as_deref(), Some("charged 42.00"));
    // The run-once namespace is apart from the default one.
    let mut once = Lease::open(
        Request::Claim(pb::Claim {
            key: "order-17".into(),
            namespace: "once".into(),
            keep: pb::Keep::Longest as i32,
            ..Default::default()
        }),
        |r| keys.claim(r),
    )
    .await;
    once.granted().await;
    once.release().await;
}

#[tokio::test]
async fn an_abandoned_claim_stores_nothing_and_the_key_stays_free() {
    let daemon = Daemon::start().await;
    let mut keys = KeysClient::new(daemon.channel().await);
    let first = {
        let mut first = Lease::open(claim("refund-3", false), |r| keys.claim(r)).await;
        first.granted().await;
        first
    };
    first.release().await;
    let mut retry = Lease::open(claim("refund-3", false), |r| keys.claim(r)).await;
    retry.granted().await;
    // A stream that goes away is an abandon too.
    drop(retry);
    let mut again = Lease::open(claim("refund-3", true), |r| keys.claim(r)).await;
    again.granted().await;
    let not_a_claim = Request::Complete(pb::Complete { result: "x".into() });
    let mut wrong = Lease::open(not_a_claim, |r| keys.claim(r)).await;
    assert_eq!(
        kind(&wrong.next().await.expect_err("opens with a Claim")),
        "InvalidArgument"
    );
}

fn window(subject: &str) -> pb::CheckRequest {
    pb::CheckRequest {
        name: "api".into(),
        subject: subject.into(),
        algorithm: pb::Algorithm::FixedWindow as i32,
        limit: 2,
        period_ms: 60_000,
        burst: 0,
    }
}

#[tokio::test]
async fn a_rate_limit_lets_its_budget_through_then_says_when_to_retry() {
    let daemon = Daemon::start().await;
    let mut limits = LimitsClient::new(daemon.channel().await);
    let first = limits.check(window("user-7")).await.unwrap().into_inner();
    assert!(first.allowed);
    assert_eq!(first.remaining, 1);
    assert!(
        limits
            .check(window("user-7"))
            .await
            .unwrap()
            .into_inner()
            .allowed
    );
    let third = limits.check(window("user-7")).await.unwrap().into_inner();
    assert!(!third.allowed);
    assert!(
        third.retry_after_ms > 0 && third.retry_after_ms <= 60_000,
        "{third:?}"
    );
    // Each subject has its own budget.
    assert!(
        limits
            .check(window("user-8"))
            .await
            .unwrap()
            .into_inner()
            .allowed
    );
    let gcra = pb::CheckRequest {
        algorithm: pb::Algorithm::Gcra as i32,
        limit: 10,
        period_ms: 1_000,
        burst: 1,
        ..window("user-9")
    };
    assert!(
        limits
            .check(gcra.clone())
            .await
            .unwrap()
            .into_inner()
            .allowed
    );
    let soon = limits.check(gcra).await.unwrap().into_inner();
    assert!(!soon.allowed, "a burst of 1 spaces requests 100 ms apart");
    assert!(soon.retry_after_ms <= 100, "{soon:?}");
    let zero = pb::CheckRequest {
        limit: 0,
        ..window("user-7")
    };
    let refused = limits.check(zero).await.expect_err("a limit of 0");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert_eq!(kind(&refused), "InvalidArgument");
}
