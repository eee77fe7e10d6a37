//! Forced unlock: an operator ends a stuck holder's lease from another
//! handle; the holder learns why at its next renewal, the name is free at
//! once and the next fence is larger; so for one holder of a semaphore,
//! named by its row in `list`; stores whose locks live in their holders'
//! sessions refuse.

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

/// One holder of a full semaphore, ended through its row in `list`: its
/// permit is free at once, it learns why at its next renewal, the others
/// keep theirs.
pub async fn forced_unlock_ends_a_semaphore_holder(f: &dyn Fixture) {
    use lockward::recipe::Semaphore;
    let name = unique("forced-sem");
    let sem = Semaphore::new(f.store().await, &name, 2).unwrap();
    let stuck = sem.try_acquire(&renewed()).await.unwrap();
    let other = sem.try_acquire(&renewed()).await.unwrap();
    let operator = f.store().await;
    let rows: Vec<_> = operator.list(&format!("{name}#permit/")).await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    // The row's id is the holder's (its slot or owner), or its fence says.
    let mine = format!("{name}#permit/{}", stuck.holder());
    let row = rows
        .iter()
        .find(|r| r.name == mine || r.fence == Some(stuck.guard().fence()))
        .unwrap_or_else(|| panic!("no row for {mine} in {rows:?}"))
        .clone();
    let seen = operator.inspect(&row.name).await.unwrap();
    assert_eq!(seen.as_ref().map(|r| &r.name), Some(&row.name), "{seen:?}");
    assert_eq!(operator.force_unlock(&row.name, &row).await.unwrap(), None);

    let next = Semaphore::new(f.store().await, &name, 2)
        .unwrap()
        .try_acquire(&renewed())
        .await
        .expect("the ended holder's permit is free at once");
    let reason = tokio::time::timeout(Duration::from_secs(5), stuck.guard().lost())
        .await
        .expect("the ended holder learns at its next renewal");
    assert_eq!(reason, LostReason::ForcedUnlock);
    assert!(!other.guard().is_lost(), "another holder was ended");
    let again = operator.force_unlock(&row.name, &row).await;
    assert!(matches!(again, Err(Error::NotOwner { .. })), "{again:?}");
    next.release().await.unwrap();
    other.release().await.unwrap();

    // A plain lock whose name has the shape of a holder's row is a lock.
    let odd = format!("{name}-lock#permit/x");
    let plain = f.store().await.try_acquire(&odd, &renewed()).await.unwrap();
    let held = operator.inspect(&odd).await.unwrap().expect("held");
    assert_eq!(held.fence, Some(plain.fence()), "{held:?}");
    assert_eq!(held.holding, lockward::Holding::Lock, "{held:?}");
    assert_eq!(operator.force_unlock(&odd, &held).await.unwrap(), None);
    let after = operator.try_acquire(&odd, &renewed()).await;
    assert!(after.is_ok(), "not freed: {after:?}");
    after.unwrap().release().await.unwrap();
}
