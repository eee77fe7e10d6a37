//! Lock-delay: a lease that ends without a release (it lapsed, or an
//! operator forced it) holds its name back for the delay; a release frees
//! it at once; stores that cannot say so.

use std::time::{Duration, Instant};

use lockward::{Error, LockOptions, LostReason, OwnerId, Renewal};

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

/// A forced unlock of a renewing holder with a lock-delay: its renewals are
/// refused at once (it learns why), but nobody gets the name before the
/// lease would have run out, at least the delay later; the placeholder
/// keeping it says why; then the next holder gets it with a larger fence.
pub async fn forced_unlock_holds_back_a_holder_with_lock_delay(f: &dyn Fixture) {
    let store = f.store().await;
    let operator = f.store().await;
    let name = unique("delay-forced");
    let renewing = LockOptions::new()
        .ttl(Duration::from_secs(2))
        .lock_delay(DELAY)
        .label("web-1:7")
        .renewal(Renewal::Every(Duration::from_millis(300)));
    let stuck = store.try_acquire(&name, &renewing).await.unwrap();
    let holder = operator.inspect(&name).await.unwrap().expect("held");
    let marked = OwnerId::from_hex(&holder.owner).map(|o| o.has_lock_delay());
    assert_eq!(
        marked,
        Some(true),
        "the store shows the holder's owner: {holder:?}"
    );

    // The lease runs out no earlier than the holder's deadline plus the
    // delay (later, if it renews meanwhile): the bound checked below.
    let deadline = stuck.deadline();
    let forced_at = Instant::now();
    let held_back = operator.force_unlock(&name, &holder).await.unwrap();
    assert!(held_back.is_some(), "not held back: {holder:?}");
    let placeholder = operator.inspect(&name).await.unwrap().expect("kept");
    assert_ne!(placeholder.owner, holder.owner);
    assert!(
        placeholder
            .label
            .as_deref()
            .is_some_and(|label| label.contains("forced unlock")),
        "{placeholder:?}"
    );
    assert!(
        matches!(
            operator.try_acquire(&name, &delayed()).await,
            Err(Error::Busy { .. })
        ),
        "free right after the forced unlock of a holder with a lock-delay"
    );
    let reason = tokio::time::timeout(Duration::from_secs(5), stuck.lost())
        .await
        .expect("the ended holder learns at its next renewal");
    assert_eq!(reason, LostReason::ForcedUnlock);

    let next = operator
        .acquire(&name, &delayed().wait(Duration::from_secs(15)))
        .await
        .expect("free once the lease would have run out");
    let waited = forced_at.elapsed();
    let drift = (Duration::from_secs(2) + DELAY) / 100 + Duration::from_millis(2);
    assert!(
        Instant::now() + drift >= deadline + DELAY,
        "taken {waited:?} after the forced unlock, {:?} after the holder's deadline: inside the lock-delay",
        Instant::now().saturating_duration_since(deadline)
    );
    let floor = f.server_ttl_floor().max(Duration::from_secs(2) + DELAY);
    assert!(
        waited < floor + Duration::from_secs(3),
        "taken only {waited:?} after the forced unlock"
    );
    assert!(next.fence() > stuck.fence());
    assert!(matches!(
        stuck.release().await,
        Err(Error::Lost {
            reason: LostReason::ForcedUnlock,
            ..
        })
    ));
    next.release().await.unwrap();
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
