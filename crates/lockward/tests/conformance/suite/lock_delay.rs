//! Lock-delay: a lease that ends without a release holds its name back for
//! the delay; a release frees it at once; stores that cannot say so.

use std::time::{Duration, Instant};

use lockward::{Error, LockOptions, Renewal};

use super::{unique, Fixture};

const TTL: Duration = Duration::from_millis(1_000);
const DELAY: Duration = Duration::from_millis(1_500);

fn delayed() -> LockOptions {
    LockOptions::new()
        .ttl(TTL)
        .lock_delay(DELAY)
        .renewal(Renewal::Off)
}

/// A holder that stops renewing (as a killed one does): nobody gets the
/// name before its deadline plus the delay; then the next holder does, with
/// a larger fence. A released one frees the name at once.
pub async fn lock_delay_holds_a_lapsed_lease_back(f: &dyn Fixture) {
    let store = f.store().await;
    let other = f.store().await;
    let name = unique("delay");
    let requested = Instant::now();
    let lapsing = store.try_acquire(&name, &delayed()).await.unwrap();
    let deadline = lapsing.deadline();
    assert!(
        deadline <= requested + TTL,
        "the holder's deadline ignores the delay"
    );
    tokio::time::sleep_until((deadline + Duration::from_millis(50)).into()).await;
    assert!(lapsing.is_lost(), "the holder's deadline passed");
    assert!(
        matches!(
            other.try_acquire(&name, &delayed()).await,
            Err(Error::Busy { .. })
        ),
        "taken right after the holder's deadline, inside the lock-delay"
    );
    let next = other
        .acquire(&name, &delayed().wait(Duration::from_secs(10)))
        .await
        .expect("free after the lock-delay");
    let waited = requested.elapsed();
    let drift = (TTL + DELAY) / 100 + Duration::from_millis(2);
    assert!(
        waited + drift >= TTL + DELAY,
        "taken {waited:?} after the first request: before TTL + delay"
    );
    let floor = f.server_ttl_floor().max(TTL + DELAY);
    assert!(
        waited < floor + Duration::from_secs(3),
        "taken only {waited:?} after the first request"
    );
    assert!(next.fence() > lapsing.fence());
    let began = Instant::now();
    next.release().await.unwrap();
    let after_release = other.try_acquire(&name, &delayed()).await;
    assert!(
        after_release.is_ok(),
        "a released lease held its name back: {after_release:?}"
    );
    assert!(began.elapsed() < DELAY, "{:?}", began.elapsed());
    after_release.unwrap().release().await.unwrap();
    drop(lapsing);
}

/// On a store that frees locks when a session ends, a lock-delay is
/// refused before anything is taken.
pub async fn lock_delay_is_refused_where_sessions_free_locks(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("delay-refused");
    let res = store.try_acquire(&name, &delayed()).await;
    assert!(
        matches!(&res, Err(Error::NotSupported { what, .. }) if what.contains("lock-delay")),
        "{res:?}"
    );
    assert!(
        store.inspect(&name).await.unwrap().is_none(),
        "taken anyway"
    );
    let res = store.acquire(&name, &delayed()).await;
    assert!(matches!(res, Err(Error::NotSupported { .. })), "{res:?}");
}
