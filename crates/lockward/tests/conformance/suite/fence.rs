//! Fenced writes: a paused holder's late write is refused by every
//! resource, or a session lock keeps the holder alone.

use std::time::Duration;

use lockward::Error;

use super::{short, unique, Fixture};

/// The paused holder on every fenced resource: holder A takes the lock,
/// is paused past its TTL, B takes it (a larger fence) and writes, A
/// resumes and writes with its old fence: refused, and B's value stays.
pub async fn paused_holders_write_is_refused(f: &dyn Fixture) {
    // The resources first: starting their servers on a busy machine
    // takes longer than any lease in this test should have to last.
    let resources = crate::resources::all().await;
    let store = f.store().await;
    let name = unique("fenced");
    let a = store.try_acquire(&name, &short(300)).await.unwrap();
    // A is paused: no renewal, nothing sent. B waits for the lock and
    // holds it for the whole test (its expiry is not what is tested).
    let b = f
        .store()
        .await
        .acquire(&name, &short(60_000).wait(Duration::from_secs(30)))
        .await
        .expect("B never got the lock");
    assert!(b.fence() > a.fence(), "{} <= {}", b.fence(), a.fence());
    for (kind, resource) in resources {
        let key = unique("account");
        resource.write(&key, b"B", b.fence()).await.unwrap();
        match resource.write(&key, b"A", a.fence()).await {
            Err(Error::Stale { fence, current, .. }) => {
                assert_eq!((fence, current), (a.fence(), b.fence()), "{kind}")
            }
            other => panic!("{kind} accepted a stale write: {other:?}"),
        }
        assert_eq!(
            resource.read(&key).await.unwrap().unwrap().value,
            b"B",
            "{kind}"
        );
    }
    assert!(a.is_lost());
    b.release().await.unwrap();
}

/// A paused holder keeps a session lock: no second holder, so no stale
/// write either. (The PostgreSQL tests end the session instead.)
pub async fn paused_session_holder_keeps_its_lock(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("fenced-session");
    let a = store.try_acquire(&name, &short(300)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let b = f.store().await.try_acquire(&name, &short(5_000)).await;
    assert!(matches!(b, Err(Error::Busy { .. })), "{b:?}");
    drop(a);
}
