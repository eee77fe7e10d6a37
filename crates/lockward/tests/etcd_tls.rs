//! `etcds://`: TLS to etcd with a private CA.

use std::time::Duration;

use lockward::{Error, LockOptions, Store};
use lockward_testkit::EtcdCluster;

#[tokio::test]
async fn locks_over_tls_and_untrusted_servers_are_refused() {
    let etcd = EtcdCluster::start_single_tls();
    let store = Store::open(&etcd.url()).await.expect("TLS connect");
    let guard = store
        .try_acquire("tls/job", &LockOptions::new().ttl(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(guard.fence() > 0);
    guard.release().await.unwrap();
    // Without ca=, the system's roots do not know the test CA.
    let untrusted = format!("etcds://{}", etcd.endpoints()[0]);
    let refused = tokio::time::timeout(Duration::from_secs(15), Store::open(&untrusted))
        .await
        .expect("untrusted TLS connect hung");
    assert!(
        matches!(refused, Err(Error::Unavailable { .. })),
        "{refused:?}"
    );
    let missing = format!("etcds://{}?ca=/nonexistent/ca.pem", etcd.endpoints()[0]);
    let err = Store::open(&missing).await.unwrap_err();
    // A configuration error (exit 64 in the CLI), not an unreachable store.
    assert!(
        matches!(err, Error::InvalidArgument { what: "url", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    // Plain text against the TLS port fails with an error, not a hang.
    let plain = tokio::time::timeout(
        Duration::from_secs(15),
        Store::open(&format!("etcd://{}", etcd.endpoints()[0])),
    )
    .await
    .expect("plain connect to a TLS port hung");
    assert!(matches!(plain, Err(Error::Unavailable { .. })), "{plain:?}");
}
