//! `mysql://…?ssl-mode=…`: TLS to MariaDB with a private CA.

use std::time::Duration;

use lockward::{Error, LockOptions, Store};
use lockward_testkit::MariadbServer;

#[tokio::test]
async fn locks_over_tls_and_untrusted_servers_are_refused() {
    let server = MariadbServer::start_tls();
    let mut open = Vec::new();
    for url in [
        server.tls_url(),
        format!("{}&mode=named", server.tls_url()),
        server.tls_url().replace("VERIFY_IDENTITY", "REQUIRED"),
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
    let encrypted: u32 = server
        .sql("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'SSL_ACCEPTS'")
        .parse()
        .unwrap();
    assert!(encrypted > 0, "no TLS session was seen");
    drop(open);
    // Without ca=, the built-in roots do not know the test CA.
    let untrusted = format!("{}?ssl-mode=VERIFY_CA", server.url());
    assert!(matches!(
        Store::open(&untrusted).await,
        Err(Error::Unavailable { .. })
    ));
    let missing = format!("{}?ssl-mode=REQUIRED&ca=/nonexistent/ca.pem", server.url());
    let err = Store::open(&missing).await.unwrap_err();
    // A configuration error (exit 64 in the CLI), not an unreachable store.
    assert!(
        matches!(err, Error::InvalidArgument { what: "url", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    // A plain server refuses what the URL asks.
    let plain = MariadbServer::start();
    let asked = format!("{}?ssl-mode=REQUIRED", plain.url());
    assert!(matches!(
        Store::open(&asked).await,
        Err(Error::Unavailable { .. })
    ));
}
