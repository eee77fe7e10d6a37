//! Recipes: election, semaphores, idempotency keys, optimistic updates
//! and rate limits, on the store under test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockward::{Error, Store};

use super::{short, unique, Fixture};

/// Leader election on this backend: one leader; a resign hands over to a
/// waiting candidate at once (pushed backends: within 100 ms), with a larger
/// epoch; `revoked` has not fired for a healthy leader.
pub async fn election_hands_over_on_resign(f: &dyn Fixture) {
    use lockward::recipe::{Candidate, ElectionConfig};
    // A retry period long enough that a pushed handover (well under a
    // second, on a loaded machine too) cannot be mistaken for a retry.
    let config = ElectionConfig {
        lease_duration: Duration::from_secs(8),
        renew_deadline: Duration::from_secs(6),
        retry_period: Duration::from_secs(2),
    };
    let name = unique("election");
    let a = Candidate::new(f.store().await, &name, "node-a", config).unwrap();
    let b = Candidate::new(f.store().await, &name, "node-b", config).unwrap();
    let leading = a.campaign().await.unwrap();
    assert_eq!(b.leader().await.unwrap().as_deref(), Some("node-a"));
    assert!(b.try_campaign().await.is_err(), "two leaders");
    let waiting = tokio::spawn(async move { (b.campaign().await, Instant::now()) });
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    // Still leading after a renewal: revoked has not fired.
    assert!(
        tokio::time::timeout(Duration::from_millis(10), leading.revoked())
            .await
            .is_err(),
        "a healthy leader was revoked"
    );
    let epoch = leading.epoch();
    let resigned = Instant::now();
    leading.resign().await.unwrap();
    let (next, at) = waiting.await.unwrap();
    let next = next.unwrap();
    let handover = at.saturating_duration_since(resigned);
    eprintln!(
        "election handover on {}: {handover:?}",
        f.url().split("://").next().unwrap_or("")
    );
    if f.store().await.capabilities().pushed_wakeups {
        assert!(handover < Duration::from_secs(1), "{handover:?}");
    }
    assert!(next.epoch() > epoch);
    assert_eq!(a.leader().await.unwrap().as_deref(), Some("node-b"));
    next.resign().await.unwrap();
    // The timing is checked: renew deadline below the lease.
    let bad = ElectionConfig {
        renew_deadline: config.lease_duration,
        ..config
    };
    assert!(matches!(
        Candidate::new(f.store().await, &name, "x", bad),
        Err(Error::InvalidArgument {
            what: "renew_deadline",
            ..
        })
    ));
}

/// A leader whose whole runtime stops past its lease: another candidate is
/// elected with a larger epoch (and an observer sees it); when the old
/// leader resumes, `revoked` fires at once and its write with the old epoch
/// is refused.
pub async fn paused_leader_is_revoked_and_fenced(f: &dyn Fixture) {
    use lockward::fence::{FencedResource, MemoryRegister};
    use lockward::recipe::{Candidate, ElectionConfig};
    let store = f.store().await;
    let config = ElectionConfig {
        lease_duration: Duration::from_millis(600),
        renew_deadline: Duration::from_millis(400),
        retry_period: Duration::from_millis(100),
    };
    let name = unique("paused-leader");
    let register = Arc::new(MemoryRegister::new());
    let (elected_tx, elected_rx) = std::sync::mpsc::channel();
    // Its own Store over the same backend: another process, in effect.
    let old_store = Store::from_shared(store.backend().clone());
    let (old_name, old_register) = (name.clone(), register.clone());
    let old = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let me = Candidate::new(old_store, &old_name, "old", config).unwrap();
            let leading = me.campaign().await.unwrap();
            elected_tx.send(leading.epoch()).unwrap();
            std::thread::sleep(Duration::from_millis(600) + f_floor_pause());
            let revoked = tokio::time::timeout(Duration::from_millis(50), leading.revoked()).await;
            let write = old_register.write("state", b"old", leading.epoch()).await;
            (revoked.is_ok(), write)
        })
    });
    let old_epoch = elected_rx.recv().unwrap();
    let observer = Candidate::new(f.store().await, &name, "observer", config).unwrap();
    assert_eq!(observer.leader().await.unwrap().as_deref(), Some("old"));
    let next = Candidate::new(f.store().await, &name, "new", config).unwrap();
    let leading = tokio::time::timeout(
        Duration::from_secs(5) + f.server_ttl_floor(),
        next.campaign(),
    )
    .await
    .expect("no new leader while the old one was paused")
    .unwrap();
    assert!(leading.epoch() > old_epoch);
    register
        .write("state", b"new", leading.epoch())
        .await
        .unwrap();
    let seen = observer.next_leader_change(Some("old")).await.unwrap();
    assert_eq!(seen.as_deref(), Some("new"));
    let (revoked_at_once, old_write) = old.join().unwrap();
    assert!(revoked_at_once, "the resumed leader was not revoked");
    assert!(
        matches!(old_write, Err(Error::Stale { .. })),
        "{old_write:?}"
    );
    assert_eq!(register.read("state").await.unwrap().unwrap().value, b"new");
    leading.resign().await.unwrap();
}

/// Long enough for any backend's server floor (etcd's whole-second leases)
/// to pass while the old leader is paused.
fn f_floor_pause() -> Duration {
    Duration::from_millis(2_500)
}

/// A semaphore of 3 permits: 12 tasks, each on its own store handle, never
/// more than 3 inside at once, at least 2 at some point, and every task
/// gets a permit in the end.
pub async fn semaphore_limits_holders(f: &dyn Fixture) {
    use lockward::recipe::Semaphore;
    let name = unique("sem");
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let sem = Semaphore::new(f.store().await, name.clone(), 3).unwrap();
        let (inside, most) = (inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            let opts = short(5_000).wait(Duration::from_secs(20));
            let permit = sem.acquire(&opts).await.expect("a permit");
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            // Longer than an admission takes on the slowest store (about
            // 45 ms through a crowd on a small API server), so that holders
            // overlap wherever the permits are really shared.
            tokio::time::sleep(Duration::from_millis(150)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            permit.release().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 3, "{most} holders of 3 permits");
    assert!(most >= 2, "the permits were never shared ({most})");

    let sem = Semaphore::new(f.store().await, name.clone(), 3).unwrap();
    let mut held = Vec::new();
    // Leases far longer than the checks below take on a loaded machine:
    // they are about the count, not expiry.
    for _ in 0..3 {
        held.push(sem.try_acquire(&short(60_000)).await.unwrap());
    }
    let mut holders: Vec<String> = held.iter().map(|p| p.holder()).collect();
    holders.sort();
    holders.dedup();
    assert_eq!(holders.len(), 3, "{holders:?}");
    let mut slots: Vec<Option<u32>> = held.iter().map(|p| p.slot()).collect();
    slots.sort();
    if sem.is_native() {
        assert_eq!(slots, vec![None; 3]);
    } else {
        assert_eq!(slots, vec![Some(0), Some(1), Some(2)]);
    }
    let full = sem.try_acquire(&short(60_000)).await;
    assert!(
        matches!(&full, Err(Error::NoPermits { why, .. }) if why == "1 wanted, 0 of 3 free"),
        "{full:?}"
    );
    // `list` (and so `status`) shows a row per holder, `NAME#permit/ID`,
    // on a ledger (its slot locks) as where the store keeps the semaphore.
    let rows = f.store().await.list(&name).await.unwrap();
    let mut shown: Vec<String> = rows
        .iter()
        .filter(|r| r.name.starts_with(&format!("{name}#permit/")))
        .map(|r| r.name.clone())
        .collect();
    shown.sort();
    assert_eq!(shown.len(), 3, "{rows:?}");
    // Each row says what it holds: permits of the semaphore where the store
    // keeps it, else the slot's lock.
    for row in rows
        .iter()
        .filter(|r| r.name.starts_with(&format!("{name}#permit/")))
    {
        let expected = if sem.is_native() {
            lockward::Holding::Permits {
                semaphore: name.clone(),
            }
        } else {
            lockward::Holding::Lock
        };
        assert_eq!(row.holding, expected, "{row:?}");
    }
    if sem.is_native() {
        // Each row carries its holder's fence.
        let mut fences: Vec<Option<u64>> = rows.iter().map(|r| r.fence).collect();
        let mut expected: Vec<Option<u64>> = held.iter().map(|p| Some(p.guard().fence())).collect();
        fences.sort();
        expected.sort();
        assert_eq!(fences, expected, "{rows:?}");
    } else {
        let mut expected: Vec<String> = held
            .iter()
            .map(|p| format!("{name}#permit/{}", p.holder()))
            .collect();
        expected.sort();
        assert_eq!(shown, expected);
    }
    for permit in held {
        permit.release().await.expect("release a permit");
    }
    assert_eq!(sem.held().await.unwrap(), 0);
    assert!(Semaphore::new(f.store().await, "x", 0).is_err());
}

/// A semaphore of 100,000 permits taken by weight: what fits is granted,
/// what does not is refused, and released permits fit again.
pub async fn semaphore_takes_permits_by_weight(f: &dyn Fixture) {
    use lockward::recipe::Semaphore;
    let sem = Semaphore::new(f.store().await, unique("sem-weighted"), 100_000).unwrap();
    let opts = short(10_000);
    let big = sem.try_acquire_many(60_000, &opts).await.unwrap();
    let too_many = sem.try_acquire_many(50_000, &opts).await;
    assert!(
        matches!(&too_many, Err(Error::NoPermits { why, .. }) if why == "50000 wanted, 40000 of 100000 free"),
        "{too_many:?}"
    );
    let rest = sem.try_acquire_many(40_000, &opts).await.unwrap();
    assert_eq!(sem.held().await.unwrap(), 100_000);
    assert!(matches!(
        sem.try_acquire(&opts).await,
        Err(Error::NoPermits { .. })
    ));
    assert_ne!(big.holder(), rest.holder());
    assert_eq!((big.permits(), rest.permits()), (60_000, 40_000));
    big.release().await.unwrap();
    let again = sem.try_acquire_many(50_000, &opts).await.unwrap();
    assert_eq!(sem.held().await.unwrap(), 90_000);
    for bad in [0, 100_001, u32::MAX] {
        assert!(matches!(
            sem.try_acquire_many(bad, &opts).await,
            Err(Error::InvalidArgument { .. })
        ));
    }
    // A waiter for more than is free gets them once they are given back.
    let waiting = {
        let sem = Semaphore::new(f.store().await, sem_name(&sem), 100_000).unwrap();
        tokio::spawn(async move {
            sem.acquire_many(70_000, &short(10_000).wait(Duration::from_secs(20)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished());
    again.release().await.unwrap();
    rest.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter never got its permits")
        .unwrap()
        .unwrap();
    assert_eq!(got.permits(), 70_000);
    got.release().await.unwrap();
    assert_eq!(sem.held().await.unwrap(), 0);
}

fn sem_name(sem: &lockward::recipe::Semaphore) -> String {
    sem.slot_name(0).trim_end_matches("#permit/0").to_string()
}

/// The store's claim to keep semaphores natively holds: then more holders
/// than a ledger lists ([`MAX_HOLDERS`](lockward::recipe::MAX_HOLDERS)) hold
/// at once, one permit each, and `held` counts them all.
pub async fn semaphore_native_holders_are_not_limited(f: &dyn Fixture) {
    use lockward::recipe::{Semaphore, MAX_HOLDERS};
    let store = f.store().await;
    let name = unique("sem-many");
    let sem = Semaphore::new(store.clone(), name.clone(), 1_000_000).unwrap();
    assert_eq!(sem.is_native(), store.capabilities().native_semaphore);
    if !sem.is_native() {
        return;
    }
    // Renewed, so that every holder still holds when the last is taken
    // and the first ones are released, however long a loaded machine
    // takes for a thousand of each (within a ZooKeeper session).
    let ttl = Duration::from_secs(120).min(store.max_ttl().unwrap_or(Duration::MAX));
    let opts = lockward::LockOptions::new().ttl(ttl);
    let holders = MAX_HOLDERS as usize + 1;
    // A few takers at once: a take may wait for the semaphore's internal
    // lock (ZooKeeper), one after the other.
    let parts = 4;
    let mut tasks = Vec::new();
    for part in 0..parts {
        let (sem, opts) = (sem.clone(), opts.clone());
        let count = holders / parts + usize::from(part < holders % parts);
        tasks.push(tokio::spawn(async move {
            let mut held = Vec::with_capacity(count);
            for _ in 0..count {
                held.push(sem.try_acquire(&opts).await.expect("a permit"));
            }
            held
        }));
    }
    let mut held = Vec::new();
    for t in tasks {
        held.extend(t.await.unwrap());
    }
    assert_eq!(held.len(), holders);
    assert_eq!(sem.held().await.unwrap() as usize, holders);
    let mut fences: Vec<u64> = held.iter().map(|p| p.guard().fence()).collect();
    fences.sort_unstable();
    fences.dedup();
    assert_eq!(fences.len(), holders, "two holders shared a fence");
    for permit in held {
        permit.release().await.unwrap();
    }
    assert_eq!(sem.held().await.unwrap(), 0);
}

/// A permit whose holder stops renewing comes back after its TTL, with a
/// larger fence.
pub async fn semaphore_permit_comes_back_after_its_ttl(f: &dyn Fixture) {
    use lockward::recipe::Semaphore;
    let sem = Semaphore::new(f.store().await, unique("sem-ttl"), 3).unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(sem.try_acquire(&short(300)).await.unwrap());
    }
    // Nobody renews: the permits come back after the TTL.
    let wait = Duration::from_millis(300).max(f.server_ttl_floor()) + Duration::from_secs(3);
    let back = sem
        .acquire(&short(1_000).wait(wait))
        .await
        .expect("an expired permit never came back");
    // Larger than the fence of the holder it replaced: the slot's on a
    // ledger, every earlier holder's where the store keeps the semaphore.
    let old = match back.slot() {
        Some(slot) => held.iter().find(|p| p.slot() == Some(slot)).unwrap(),
        None => held.iter().max_by_key(|p| p.guard().fence()).unwrap(),
    };
    assert!(back.guard().fence() > old.guard().fence());
    back.release().await.unwrap();
}

/// An idempotency key: of 6 concurrent duplicates exactly one runs, the
/// others are told it is in progress; later duplicates get the stored
/// result; a failed run stores nothing and can be retried.
pub async fn idempotency_runs_once(f: &dyn Fixture) {
    use lockward::recipe::{Idempotency, IdempotencyError, Idempotent};
    let key = unique("order");
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let keys = Idempotency::new(f.store().await);
        let (key, runs) = (key.clone(), runs.clone());
        tasks.push(tokio::spawn(async move {
            keys.run(&key, || async {
                runs.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<_, std::io::Error>("charged".to_string())
            })
            .await
            .unwrap()
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "{outcomes:?}");
    let ran = outcomes
        .iter()
        .filter(|o| matches!(o, Idempotent::Ran(_)))
        .count();
    assert_eq!(ran, 1, "{outcomes:?}");
    assert!(outcomes.iter().all(|o| matches!(
        o,
        Idempotent::Ran(_) | Idempotent::InProgress | Idempotent::Stored(_)
    )));
    let keys = Idempotency::new(f.store().await);
    let later = keys
        .run(&key, || async {
            Ok::<_, std::io::Error>("again".to_string())
        })
        .await
        .unwrap();
    assert_eq!(later, Idempotent::Stored("charged".into()));

    let flaky = unique("flaky");
    let failed = keys
        .run(&flaky, || async { Err::<String, _>("card declined") })
        .await;
    assert!(matches!(
        failed,
        Err(IdempotencyError::Operation("card declined"))
    ));
    assert_eq!(keys.result(&flaky).await.unwrap(), None);
    let retried = keys
        .run(&flaky, || async { Ok::<_, &str>("charged".to_string()) })
        .await
        .unwrap();
    assert_eq!(retried, Idempotent::Ran("charged".into()));
}

/// 8 tasks, each on its own store handle, add 1 to one counter 10 times
/// with optimistic updates: nothing is lost.
pub async fn optimistic_updates_lose_nothing(f: &dyn Fixture) {
    use lockward::recipe::Optimistic;
    let key = unique("counter");
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let counter = Optimistic::new(f.store().await).tries(200);
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..10 {
                let done = counter
                    .update(&key, |v| {
                        let n: u64 = v.map_or(0, |v| v.parse().unwrap());
                        Ok::<_, std::convert::Infallible>((n + 1).to_string())
                    })
                    .await
                    .unwrap_or_else(|e| panic!("update failed: {e}"));
                conflicts += done.conflicts;
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for t in tasks {
        conflicts += t.await.unwrap();
    }
    let counter = Optimistic::new(f.store().await);
    let last = counter.read(&key).await.unwrap().unwrap();
    assert_eq!(
        last.value, "80",
        "lost updates ({conflicts} conflicts retried)"
    );
    let declined = counter.update(&key, |_| Err::<String, _>("sold out")).await;
    assert!(matches!(
        declined,
        Err(lockward::recipe::UpdateError::Declined("sold out"))
    ));
    assert_eq!(
        counter.read(&key).await.unwrap().unwrap().version,
        last.version
    );
}

/// 20 concurrent requests against a limit of 5 per minute: exactly 5 pass,
/// the rest are told when to retry; GCRA lets a burst of 3 through, then
/// spaces requests out.
pub async fn rate_limits_hold(f: &dyn Fixture) {
    use lockward::recipe::{Decision, FixedWindow, Gcra};
    // Windows are aligned to the minute: 20 requests that straddle a new
    // one are rightly counted in two. Start well inside a window.
    let into_minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % 60_000;
    if into_minute > 45_000 {
        tokio::time::sleep(Duration::from_millis(60_000 - into_minute as u64 + 100)).await;
    }
    let name = unique("api");
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let limit =
            FixedWindow::new(f.store().await, name.clone(), 5, Duration::from_secs(60)).unwrap();
        tasks.push(tokio::spawn(
            async move { limit.check("user-1").await.unwrap() },
        ));
    }
    let mut allowed = 0;
    for t in tasks {
        match t.await.unwrap() {
            Decision::Allowed { .. } => allowed += 1,
            Decision::Limited { retry_after } => assert!(retry_after <= Duration::from_secs(60)),
        }
    }
    assert_eq!(allowed, 5, "a limit of 5 let {allowed} through");
    let other =
        FixedWindow::new(f.store().await, name.clone(), 5, Duration::from_secs(60)).unwrap();
    assert!(matches!(
        other.check("user-2").await.unwrap(),
        Decision::Allowed { remaining: 4 }
    ));

    let gcra = Gcra::new(
        f.store().await,
        unique("gcra"),
        10,
        Duration::from_secs(10),
        3,
    )
    .unwrap();
    let mut decisions = Vec::new();
    for _ in 0..4 {
        decisions.push(gcra.check("user-1").await.unwrap());
    }
    assert!(
        decisions[..3]
            .iter()
            .all(|d| matches!(d, Decision::Allowed { .. })),
        "{decisions:?}"
    );
    match decisions[3] {
        Decision::Limited { retry_after } => {
            assert!(retry_after <= Duration::from_secs(1), "{retry_after:?}")
        }
        other => panic!("the 4th request of a burst of 3 passed: {other:?}"),
    }
    assert!(FixedWindow::new(f.store().await, "x", 0, Duration::from_secs(1)).is_err());
}
