//! `zks://`: TLS to ZooKeeper (Netty, `secureClientPort`) with a private CA,
//! digest authentication over it, and clear errors for what is wrong.

use std::time::Duration;

use lockward::{Error, LockOptions, Store};
use lockward_testkit::ZookeeperEnsemble;

fn opts() -> LockOptions {
    LockOptions::new().ttl(Duration::from_secs(5))
}

#[tokio::test]
async fn locks_over_tls_with_digest_auth_and_untrusted_servers_are_refused() {
    let zk = ZookeeperEnsemble::start_single_tls();
    let url = zk.tls_url();
    let store = Store::open(&url).await.expect("TLS connect");
    assert_eq!(store.address(), url, "the address shows the TLS URL");
    let guard = store.try_acquire("tls/job", &opts()).await.unwrap();
    let other = Store::open(&url).await.unwrap();
    assert!(matches!(
        other.try_acquire("tls/job", &opts()).await,
        Err(Error::Busy { .. })
    ));
    let fence = guard.fence();
    guard.release().await.unwrap();
    let next = other.try_acquire("tls/job", &opts()).await.unwrap();
    assert!(next.fence() > fence);
    next.release().await.unwrap();

    // Digest authentication over TLS: another identity cannot touch the
    // lock, and the password is never shown.
    let secure = url
        .trim_start_matches("zks://")
        .replace("?ca=", "/authed?ca=");
    let app = Store::open(&format!("zks://app:app-secret@{secure}"))
        .await
        .unwrap();
    let held = app.try_acquire("authed", &opts()).await.unwrap();
    let intruder = Store::open(&format!("zks://app:wrong-secret@{secure}"))
        .await
        .unwrap();
    let refused = intruder.try_acquire("authed", &opts()).await;
    let shown = format!("{refused:?}");
    assert!(refused.is_err(), "{shown}");
    assert!(
        !shown.contains("wrong-secret") && !shown.contains("app-secret"),
        "{shown}"
    );
    held.release().await.unwrap();

    // Without ca=, the well-known roots do not know the test CA.
    let untrusted = url.split('?').next().unwrap().to_string();
    let refused = tokio::time::timeout(Duration::from_secs(15), Store::open(&untrusted))
        .await
        .expect("an untrusted TLS connect hung");
    assert!(
        matches!(refused, Err(Error::Unavailable { .. })),
        "{refused:?}"
    );

    // A CA file that cannot be read is the URL's fault.
    let missing = format!("{untrusted}?ca=/nonexistent/ca.pem");
    let err = Store::open(&missing).await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument { what: "url", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");

    // Plain text against the TLS port fails with an error, not a hang.
    let plain = untrusted.replace("zks://", "zk://");
    let plain = tokio::time::timeout(Duration::from_secs(15), Store::open(&plain))
        .await
        .expect("a plain connect to the TLS port hung");
    assert!(matches!(plain, Err(Error::Unavailable { .. })), "{plain:?}");
}
