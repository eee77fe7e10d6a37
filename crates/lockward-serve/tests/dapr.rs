//! Dapr's lock calls against a real daemon on a SQLite store, as Dapr's
//! SDKs make them: one owner wins, unlock answers as Dapr defines, expiry
//! frees, the fence rides in a header, and the health route answers.

use std::time::Duration;

use lockward_serve::pb_dapr::{
    dapr_client::DaprClient, unlock_response::Status as Unlock, TryLockRequest, UnlockRequest,
};
use lockward_serve::{Service, FENCE_HEADER};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

mod daemon;
use daemon::Daemon;

async fn client(daemon: &Daemon) -> DaprClient<Channel> {
    DaprClient::new(daemon.channel().await)
}

fn try_lock(resource: &str, owner: &str, seconds: i32) -> TryLockRequest {
    TryLockRequest {
        store_name: "lockward".into(),
        resource_id: resource.into(),
        lock_owner: owner.into(),
        expiry_in_seconds: seconds,
    }
}

fn unlock(resource: &str, owner: &str) -> UnlockRequest {
    UnlockRequest {
        store_name: "lockward".into(),
        resource_id: resource.into(),
        lock_owner: owner.into(),
    }
}

#[tokio::test]
async fn one_owner_wins_and_unlock_answers_as_dapr_defines() {
    let daemon = Daemon::start().await;
    let mut dapr = client(&daemon).await;
    let won = dapr
        .try_lock_alpha1(try_lock("orders", "a", 30))
        .await
        .unwrap();
    let fence: u64 = won
        .metadata()
        .get(FENCE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a fence header");
    assert!(won.into_inner().success);
    assert!(fence > 0);
    let lost = dapr
        .try_lock_alpha1(try_lock("orders", "b", 30))
        .await
        .unwrap();
    assert!(!lost.into_inner().success);
    // The same lock as every other client's: status shows it.
    let holder = daemon.store.inspect("orders").await.unwrap().expect("held");
    assert_eq!(holder.label.as_deref(), Some("dapr:a"));
    let status =
        |r: tonic::Response<lockward_serve::pb_dapr::UnlockResponse>| r.into_inner().status;
    let by_other = dapr.unlock_alpha1(unlock("orders", "b")).await.unwrap();
    assert_eq!(status(by_other), Unlock::LockBelongsToOthers as i32);
    let unlocked = dapr.unlock_alpha1(unlock("orders", "a")).await.unwrap();
    assert_eq!(status(unlocked), Unlock::Success as i32);
    let again = dapr.unlock_alpha1(unlock("orders", "a")).await.unwrap();
    assert_eq!(status(again), Unlock::LockDoesNotExist as i32);
    // The next owner's fence is larger.
    let next = dapr
        .try_lock_alpha1(try_lock("orders", "b", 30))
        .await
        .unwrap();
    let next_fence: u64 = next
        .metadata()
        .get(FENCE_HEADER)
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(next_fence > fence);
}

#[tokio::test]
async fn a_lock_expires_without_an_unlock() {
    let daemon = Daemon::start().await;
    let mut dapr = client(&daemon).await;
    assert!(
        dapr.try_lock_alpha1(try_lock("job", "a", 1))
            .await
            .unwrap()
            .into_inner()
            .success
    );
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert!(
        dapr.try_lock_alpha1(try_lock("job", "b", 30))
            .await
            .unwrap()
            .into_inner()
            .success
    );
    let gone = dapr
        .unlock_alpha1(unlock("job", "a"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(gone.status, Unlock::LockBelongsToOthers as i32);
}

#[tokio::test]
async fn a_lock_held_by_another_client_belongs_to_others() {
    let daemon = Daemon::start().await;
    let mut dapr = client(&daemon).await;
    let guard = daemon
        .store
        .try_acquire("report", &Default::default())
        .await
        .unwrap();
    assert!(
        !dapr
            .try_lock_alpha1(try_lock("report", "a", 30))
            .await
            .unwrap()
            .into_inner()
            .success
    );
    let answer = dapr
        .unlock_alpha1(unlock("report", "a"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.status, Unlock::LockBelongsToOthers as i32);
    guard.release().await.unwrap();
}

#[tokio::test]
async fn bad_requests_are_invalid_arguments() {
    let daemon = Daemon::start_with(|store| Service::new(store).dapr_store("locks")).await;
    let mut dapr = client(&daemon).await;
    let unknown = dapr
        .try_lock_alpha1(try_lock("x", "a", 30))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::InvalidArgument);
    assert!(unknown.message().contains("\"lockward\""), "{unknown:?}");
    let mut ok = try_lock("x", "a", 0);
    ok.store_name = "locks".into();
    for (bad, needle) in [
        (ok.clone(), "expiry_in_seconds"),
        (
            TryLockRequest {
                expiry_in_seconds: -1,
                ..ok.clone()
            },
            "expiry_in_seconds",
        ),
        (
            TryLockRequest {
                expiry_in_seconds: i32::MAX,
                ..ok.clone()
            },
            "expiry_in_seconds",
        ),
        (
            TryLockRequest {
                lock_owner: String::new(),
                expiry_in_seconds: 5,
                ..ok.clone()
            },
            "lock_owner",
        ),
        (
            TryLockRequest {
                resource_id: "n".repeat(1 << 20),
                expiry_in_seconds: 5,
                ..ok.clone()
            },
            "name",
        ),
    ] {
        let status = dapr.try_lock_alpha1(bad).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains(needle), "{status:?}");
    }
}

#[tokio::test]
async fn the_health_route_answers_over_http1() {
    let daemon = Daemon::start().await;
    let mut http = tokio::net::TcpStream::connect(&daemon.address)
        .await
        .unwrap();
    http.write_all(
        b"GET /v1.0/healthz/outbound HTTP/1.1\r\nHost: lockward\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
}
