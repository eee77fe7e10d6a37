//! Multi-locks: all or nothing, one canonical order, one deadline, lost
//! when any one is lost.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockward::{Error, LockOptions};

use super::{short, unique, Fixture};

/// A held name makes the whole multi-lock fail, at once or after the one
/// overall wait, and leaves none of the other names taken; once it is
/// free, every name is held with its own fence.
pub async fn multi_lock_takes_all_or_nothing(f: &dyn Fixture) {
    let prefix = unique("multi");
    let [a, b, c] = ["a", "b", "c"].map(|n| format!("{prefix}/{n}"));
    let holder_store = f.store().await;
    let holder = holder_store.try_acquire(&b, &short(10_000)).await.unwrap();
    let store = f.store().await;

    let busy = store.try_acquire_all([&c, &a, &b], &short(10_000)).await;
    assert!(
        matches!(&busy, Err(Error::Busy { name }) if *name == b),
        "{busy:?}"
    );
    let began = Instant::now();
    let timed_out = store
        .acquire_all(
            [&c, &b, &a],
            &short(10_000).wait(Duration::from_millis(300)),
        )
        .await;
    assert!(
        matches!(&timed_out, Err(Error::TimedOut { name, waited }) if *name == b && *waited >= Duration::from_millis(300)),
        "{timed_out:?}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    for free in [&a, &c] {
        assert!(
            store.inspect(free).await.unwrap().is_none(),
            "{free} stayed taken after the multi-lock failed"
        );
    }

    holder.release().await.unwrap();
    let all = store
        .acquire_all([&c, &a, &b], &short(10_000).wait(Duration::from_secs(5)))
        .await
        .unwrap();
    let names: Vec<&str> = all.names().iter().map(|n| n.as_str()).collect();
    assert_eq!(names, [&a, &b, &c], "not in canonical order");
    for name in [&a, &b, &c] {
        let info = store.inspect(name).await.unwrap().expect("held");
        assert_eq!(info.fence, all.fence(name), "{name}");
    }
    let earliest = all.guards().iter().map(|g| g.deadline()).min().unwrap();
    assert_eq!(all.deadline(), earliest, "the deadline is the earliest");
    all.release().await.unwrap();
    for name in [&a, &b, &c] {
        assert!(store.inspect(name).await.unwrap().is_none(), "{name} kept");
    }
}

/// Two holders asking for the same names in opposite orders, on separate
/// handles, never deadlock and never overlap.
pub async fn multi_lock_order_cannot_deadlock(f: &dyn Fixture) {
    const ROUNDS: u64 = 15;
    let prefix = unique("order");
    let names: Vec<String> = ["x", "y", "z"]
        .iter()
        .map(|n| format!("{prefix}/{n}"))
        .collect();
    let inside = Arc::new(AtomicUsize::new(0));
    let counter = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for reversed in [false, true] {
        let store = f.store().await;
        let mut order = names.clone();
        if reversed {
            order.reverse();
        }
        let (inside, counter) = (inside.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let opts = LockOptions::new()
                .ttl(Duration::from_secs(10))
                .wait(Duration::from_secs(20));
            for _ in 0..ROUNDS {
                let all = store.acquire_all(&order, &opts).await.expect("deadlock?");
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "overlap");
                let seen = counter.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                counter.store(seen + 1, Ordering::SeqCst);
                inside.fetch_sub(1, Ordering::SeqCst);
                all.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(counter.load(Ordering::SeqCst), 2 * ROUNDS, "lost updates");
}

/// When one of the locks is taken away, the multi-lock's `lost()` fires,
/// names it, and the others stay held until the multi-lock is released.
pub async fn multi_lock_is_lost_when_one_is(f: &dyn Fixture) {
    let store = f.store().await;
    let prefix = unique("multi-lost");
    let [a, b] = ["a", "b"].map(|n| format!("{prefix}/{n}"));
    let opts = LockOptions::new().ttl(Duration::from_millis(1_500));
    let all = store.acquire_all([&b, &a], &opts).await.unwrap();
    let lease_b = all.guard(&b).unwrap().lease();
    store.release(&lease_b).await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), all.lost())
        .await
        .expect("lost() did not fire when one lock was taken away");
    let (lost, _) = all.lost_reason().expect("a lost lock");
    assert_eq!(lost.as_str(), b);
    assert!(
        store.inspect(&a).await.unwrap().is_some(),
        "the other lock was let go"
    );
    assert!(matches!(all.release().await, Err(Error::Lost { .. })));
    // Let go: another handle takes it at once.
    let again = f.store().await.try_acquire(&a, &short(5_000)).await;
    assert!(again.is_ok(), "{a} kept: {again:?}");
}

/// Empty, duplicate, oversized and malformed name lists are refused before
/// anything is taken.
pub async fn multi_lock_refuses_bad_name_lists(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("multi-input");
    let opts = short(5_000);
    let cases: Vec<Vec<String>> = vec![
        vec![],
        vec![name.clone(), name.clone()],
        (0..=lockward::recipe::multi_lock::MAX_NAMES)
            .map(|i| format!("{name}/{i}"))
            .collect(),
        vec![name.clone(), "bad\0name".into()],
    ];
    for names in cases {
        let res = store.acquire_all(&names, &opts).await;
        assert!(
            matches!(res, Err(Error::InvalidArgument { .. })),
            "{} names: {res:?}",
            names.len()
        );
        assert!(
            store.inspect(&name).await.unwrap().is_none(),
            "taken anyway"
        );
    }
}
