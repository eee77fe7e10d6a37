//! A daemon with a token: calls without it are refused as
//! `UNAUTHENTICATED`, calls with it (a bearer token, or Dapr's
//! `dapr-api-token`) are served, and the health checks answer either way.

use lockward_serve::pb::{locks_client::LocksClient, InspectRequest};
use lockward_serve::pb_dapr::{dapr_client::DaprClient, TryLockRequest};
use lockward_serve::{Service, Token};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Request;
use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient};

mod daemon;
use daemon::{kind, Daemon};

const SECRET: &str = "s3cret-token-for-tests";

fn with(request: InspectRequest, header: &'static str, value: &str) -> Request<InspectRequest> {
    let mut request = Request::new(request);
    request
        .metadata_mut()
        .insert(header, value.parse().unwrap());
    request
}

#[tokio::test]
async fn calls_without_the_token_are_refused_and_with_it_served() {
    let daemon =
        Daemon::start_with(|store| Service::new(store).token(Token::new(SECRET).unwrap())).await;
    let mut locks = LocksClient::new(daemon.channel().await);
    let ask = || InspectRequest { name: "a".into() };

    let refused = locks.inspect(ask()).await.expect_err("no token");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    assert_eq!(kind(&refused), "Unauthenticated");
    assert!(!refused.message().contains(SECRET));
    let wrong = with(ask(), "authorization", "Bearer s3cret-token-for-tesTS");
    assert_eq!(
        locks
            .inspect(wrong)
            .await
            .expect_err("a wrong token")
            .code(),
        tonic::Code::Unauthenticated
    );
    let bearer = with(ask(), "authorization", &format!("Bearer {SECRET}"));
    assert_eq!(locks.inspect(bearer).await.unwrap().into_inner().row, None);

    // Dapr's SDKs send the token as dapr-api-token.
    let mut dapr = DaprClient::new(daemon.channel().await);
    let mut lock = Request::new(TryLockRequest {
        store_name: "lockward".into(),
        resource_id: "orders".into(),
        lock_owner: "a".into(),
        expiry_in_seconds: 10,
    });
    lock.metadata_mut()
        .insert("dapr-api-token", SECRET.parse().unwrap());
    assert!(
        dapr.try_lock_alpha1(lock)
            .await
            .unwrap()
            .into_inner()
            .success
    );

    // The health checks need no token.
    let mut health = HealthClient::new(daemon.channel().await);
    for service in ["", "lockward.v1.Locks", "lockward.v1.Elections"] {
        let asked = tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        };
        let status = health.check(asked).await.unwrap().into_inner().status;
        assert_eq!(status, ServingStatus::Serving as i32, "{service:?}");
    }
    let mut http = tokio::net::TcpStream::connect(&daemon.address)
        .await
        .unwrap();
    http.write_all(b"GET /v1.0/healthz/outbound HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
}

#[test]
fn a_short_token_is_refused() {
    let error = Token::new("short\n").unwrap_err();
    assert!(error.to_string().contains("at least 16"), "{error}");
}
