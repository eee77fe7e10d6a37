//! `postgres://…?sslmode=require`: TLS to PostgreSQL with a private CA.

use std::time::Duration;

use lockward::{Error, LockOptions, Store};
use lockward_testkit::PostgresServer;

#[tokio::test]
async fn locks_over_tls_and_untrusted_servers_are_refused() {
    let server = PostgresServer::start_tls();
    let mut open = Vec::new();
    for url in [
        server.tls_url(),
        format!("{}&mode=advisory", server.tls_url()),
    ] {
        let store = Store::open(&url).await.expect("TLS connect");
        let guard = store
            .acquire("tls/job", &LockOptions::new().ttl(Duration::from_secs(5)))
            .await
            .unwrap();
        assert!(guard.fence() > 0);
        guard.release().await.unwrap();
        open.push(store);
    }
    // The server really speaks TLS to us (while our sessions are open).
    assert_eq!(
        server.psql("SELECT count(*) > 0 FROM pg_stat_ssl WHERE ssl"),
        "t",
        "no TLS session was seen"
    );
    drop(open);
    // Without ca=, the system's roots do not know the test CA.
    let untrusted = format!("{}?sslmode=require", server.url());
    assert!(matches!(
        Store::open(&untrusted).await,
        Err(Error::Unavailable { .. })
    ));
    let missing = format!("{}?sslmode=require&ca=/nonexistent/ca.pem", server.url());
    let err = Store::open(&missing).await.unwrap_err();
    // A configuration error (exit 64 in the CLI), not an unreachable store.
    assert!(
        matches!(err, Error::InvalidArgument { what: "url", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
}
