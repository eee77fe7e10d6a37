//! `rediss://`: TLS to Redis, with a test CA; and a refusal without it.

use std::time::Duration;

use lockward::{Error, LockOptions, Store};
use lockward_testkit::{RedisOptions, RedisServer};

fn tls_server(password: Option<&str>) -> RedisServer {
    RedisServer::start_with(RedisOptions {
        tls: true,
        password: password.map(str::to_string),
        ..Default::default()
    })
}

#[tokio::test]
async fn locks_over_tls_with_a_private_ca() {
    let server = tls_server(Some("tls-secret"));
    let store = Store::open(&server.url()).await.expect("TLS connect");
    let opts = LockOptions::new().ttl(Duration::from_secs(5));
    let guard = store.try_acquire("tls/job", &opts).await.unwrap();
    assert!(guard.fence() > 0);
    // A waiter over TLS is woken by the release (pub/sub over TLS too).
    let waiter_store = Store::open(&server.url()).await.unwrap();
    let waiter = tokio::spawn(async move {
        waiter_store
            .acquire("tls/job", &LockOptions::new().wait(Duration::from_secs(5)))
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.release().await.unwrap();
    let next = waiter.await.unwrap().unwrap();
    assert!(next.fence() > 0);
    assert!(!store.address().contains("tls-secret"));
}

#[tokio::test]
async fn an_untrusted_server_is_refused() {
    let server = tls_server(None);
    // Without ca=, the system roots do not know the test CA.
    let url = format!("rediss://{}", server.addr());
    let err = Store::open(&url).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    // Plain TCP to a TLS port fails too, with an error rather than a hang.
    let plain = tokio::time::timeout(
        Duration::from_secs(10),
        Store::open(&format!("redis://{}", server.addr())),
    )
    .await
    .expect("plain connect to a TLS port hung");
    assert!(plain.is_err());
}

#[tokio::test]
async fn missing_ca_file_is_a_clear_error() {
    let server = tls_server(None);
    let url = format!("rediss://{}?ca=/nonexistent/ca.pem", server.addr());
    let err = Store::open(&url).await.unwrap_err();
    // A configuration error (exit 64 in the CLI), not an unreachable store.
    assert!(
        matches!(err, Error::InvalidArgument { what: "url", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
}
