//! Forced unlock: an operator ends a stuck holder's lease from another
//! handle; the holder learns why at its next renewal, the name is free at
//! once and the next fence is larger; stores whose locks live in their
//! holders' sessions refuse.

use std::time::Duration;

use lockward::{Error, LockOptions, LostReason, Renewal};

use super::{unique, Fixture};

fn renewed() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(6))
        .renewal(Renewal::Every(Duration::from_millis(300)))
}

pub async fn forced_unlock_ends_the_holder(f: &dyn Fixture) {
    let store = f.store().await;
    let operator = f.store().await;
    let name = unique("forced");
    let stuck = store.try_acquire(&name, &renewed()).await.unwrap();
    let holder = operator.inspect(&name).await.unwrap().expect("held");
    assert_eq!(holder.fence, Some(stuck.fence()), "{holder:?}");
    operator.force_unlock(&name, &holder).await.unwrap();

    let next = operator
        .try_acquire(&name, &renewed())
        .await
        .expect("free at once after a forced unlock");
    assert!(next.fence() > stuck.fence());
    let reason = tokio::time::timeout(Duration::from_secs(5), stuck.lost())
        .await
        .expect("the ended holder learns at its next renewal");
    assert_eq!(reason, LostReason::ForcedUnlock);
    assert!(
        matches!(
            stuck.release().await,
            Err(Error::Lost {
                reason: LostReason::ForcedUnlock,
                ..
            })
        ),
        "the ended holder's release says why"
    );

    // The ended holder is no longer there to end; the new one is untouched.
    let again = operator.force_unlock(&name, &holder).await;
    assert!(matches!(again, Err(Error::NotOwner { .. })), "{again:?}");
    assert!(!next.is_lost());
    next.release().await.unwrap();
}

pub async fn forced_unlock_is_refused_where_locks_live_in_sessions(f: &dyn Fixture) {
    let store = f.store().await;
    let operator = f.store().await;
    let name = unique("forced-refused");
    let held = store.try_acquire(&name, &LockOptions::new()).await.unwrap();
    let holder = operator.inspect(&name).await.unwrap().expect("held");
    let res = operator.force_unlock(&name, &holder).await;
    assert!(
        matches!(&res, Err(Error::NotSupported { what, .. }) if what.contains("forced unlock")),
        "{res:?}"
    );
    assert!(!held.is_lost());
    held.release().await.unwrap();
}
