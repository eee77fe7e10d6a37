//! Bad input: every invalid name, TTL and option gets its typed error.

use std::time::Duration;

use lockward::{Error, LockOptions, Renewal, Store};

use super::{unique, Fixture};

/// Every bad input gets its typed error before anything reaches the store.
pub async fn bad_input(f: &dyn Fixture) {
    let store = f.store().await;
    let ok = LockOptions::new();
    for name in [
        String::new(),
        "x".repeat(257),
        "a\0b".into(),
        "line\nbreak".into(),
    ] {
        match store.try_acquire(&name, &ok).await {
            Err(Error::InvalidArgument { what: "name", .. }) => {}
            other => panic!("name {name:?}: {other:?}"),
        }
    }
    for ttl in [Duration::ZERO, Duration::from_secs(365 * 24 * 3600)] {
        match store
            .try_acquire("fine", &LockOptions::new().ttl(ttl))
            .await
        {
            Err(Error::InvalidArgument { what: "ttl", .. }) => {}
            other => panic!("ttl {ttl:?}: {other:?}"),
        }
    }
    let renew_too_slow = LockOptions::new()
        .ttl(Duration::from_secs(1))
        .renewal(Renewal::Every(Duration::from_secs(2)));
    assert!(matches!(
        store.try_acquire("fine", &renew_too_slow).await,
        Err(Error::InvalidArgument {
            what: "renewal",
            ..
        })
    ));
    for url in [
        "no-scheme",
        "gopher://x",
        "sqlite//missing-colon",
        "redis://h:0",
    ] {
        match Store::open(url).await {
            Err(Error::InvalidArgument { what: "url", .. }) => {}
            other => panic!("url {url:?}: {other:?}"),
        }
    }
    // The store is still usable after all of that.
    let name = unique("after-bad-input");
    store
        .try_acquire(&name, &ok)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}
