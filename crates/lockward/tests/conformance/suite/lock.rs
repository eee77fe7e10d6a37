//! Locks: mutual exclusion, fences, ownership, expiry, extension,
//! renewal, loss, time-outs, cancellation, inspection, release on drop.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockward::{Error, LockOptions, LostReason, OwnerId};

use super::{short, unique, Fixture};

/// 16 tasks, each on its own store handle, do an unprotected
/// read–sleep–write of a counter under the lock; the total must be exact
/// and no two may ever be inside at once.
pub async fn mutual_exclusion(f: &dyn Fixture) {
    const TASKS: u64 = 16;
    const ROUNDS: u64 = 5;
    let name = unique("mutex");
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = f.store().await;
        let (name, counter, inside) = (name.clone(), counter.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let opts = LockOptions::new().ttl(Duration::from_secs(10));
            for _ in 0..ROUNDS {
                let guard = store.acquire(&name, &opts).await.expect("acquire");
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                let seen = counter.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                counter.store(seen + 1, Ordering::SeqCst);
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(
        counter.load(Ordering::SeqCst),
        TASKS * ROUNDS,
        "lost updates"
    );
}

/// 1,000 acquisitions, some ending by expiry (where the store expires
/// locks) and some after reopening the store (durable backends): every
/// fence is larger than the one before.
pub async fn fences_increase(f: &dyn Fixture) {
    let name = unique("fences");
    let mut store = f.store().await;
    let durable = store.capabilities().durable;
    let expires = store.capabilities().expires;
    // Released ones are held long enough that a release reaches a loaded
    // server before the TTL; the ones left to expire briefly.
    let (released, expiring) = (short(10_000), short(300));
    let mut last = 0;
    for i in 0..1000 {
        if durable && i % 250 == 249 {
            store = f.store().await;
        }
        let left_to_expire = i % 200 == 199 && expires;
        let opts = if left_to_expire { &expiring } else { &released };
        let guard = store.acquire(&name, opts).await.expect("acquire");
        assert!(guard.fence() > last, "fence {} after {last}", guard.fence());
        last = guard.fence();
        if left_to_expire {
            // Let it expire instead of releasing it (dropping would release).
            std::mem::forget(guard);
        } else {
            guard.release().await.expect("release");
        }
    }
}

/// Release and extend by someone who does not hold the lock are refused,
/// and the holder keeps it.
pub async fn non_owner_refused(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("owner");
    let guard = store.try_acquire(&name, &short(5_000)).await.unwrap();
    let forged = lockward::Lease {
        owner: OwnerId::random(),
        ..guard.lease()
    };
    assert!(matches!(
        store.release(&forged).await,
        Err(Error::NotOwner { .. })
    ));
    assert!(matches!(
        store.extend(&forged, Duration::from_secs(5)).await,
        Err(Error::NotOwner { .. })
    ));
    let other = f.store().await;
    assert!(matches!(
        other.try_acquire(&name, &short(5_000)).await,
        Err(Error::Busy { .. })
    ));
    guard.release().await.unwrap();
}

/// A lease left to its TTL frees the lock.
pub async fn expiry_frees(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("expiry");
    let guard = store.try_acquire(&name, &short(150)).await.unwrap();
    let first_fence = guard.fence();
    assert!(store.try_acquire(&name, &short(150)).await.is_err());
    let server_ttl = Duration::from_millis(150).max(f.server_ttl_floor());
    tokio::time::sleep(server_ttl + Duration::from_millis(100)).await;
    assert!(guard.is_lost(), "the holder's deadline passed");
    let next = store
        .acquire(&name, &short(1_000).wait(Duration::from_secs(1)))
        .await
        .expect("free after TTL");
    assert!(next.fence() > first_fence);
    next.release().await.unwrap();
}

/// A session lock outlives its TTL while its session lives (the holder's
/// deadline passes, nobody else can take it), and is free once the holder
/// lets it go.
pub async fn session_lock_outlives_its_ttl(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("session");
    let guard = store.try_acquire(&name, &short(150)).await.unwrap();
    let first_fence = guard.fence();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(guard.is_lost(), "the holder's deadline passed");
    assert!(matches!(
        f.store().await.try_acquire(&name, &short(1_000)).await,
        Err(Error::Busy { .. })
    ));
    drop(guard);
    let next = store
        .acquire(&name, &short(1_000).wait(Duration::from_secs(1)))
        .await
        .expect("free once released");
    assert!(next.fence() > first_fence);
    next.release().await.unwrap();
}

/// Extending before the TTL keeps the lock past the original expiry.
pub async fn extend_keeps(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("extend");
    // Each extension comes half a lease after the one before: a loaded
    // machine that is late by most of a second still extends in time.
    let guard = store.try_acquire(&name, &short(1_600)).await.unwrap();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(800)).await;
        guard.extend(None).await.expect("extend");
    }
    // 2.4 s after a 1.6 s lease was taken, it is still held.
    assert!(matches!(
        store.try_acquire(&name, &short(1_600)).await,
        Err(Error::Busy { .. })
    ));
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
}

/// Automatic renewal keeps the lock for many TTLs.
pub async fn renewal_keeps(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("renew");
    let opts = LockOptions::new().ttl(Duration::from_millis(600));
    let guard = store.try_acquire(&name, &opts).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(!guard.is_lost(), "renewal let the lease lapse");
    assert!(matches!(
        f.store().await.try_acquire(&name, &short(300)).await,
        Err(Error::Busy { .. })
    ));
    guard.release().await.unwrap();
}

/// Takes a 200 ms lock, leaves it unrenewed, and checks that `lost()` fires
/// with `Expired` at the local deadline, before the store's expiry (which
/// counts from after the request started). The lock's name and its guard.
async fn lose_by_the_deadline(f: &dyn Fixture) -> (String, lockward::Guard) {
    let store = f.store().await;
    let name = unique("lost");
    let guard = store.try_acquire(&name, &short(200)).await.unwrap();
    let taken = Instant::now();
    let reason = tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost() never fired");
    assert_eq!(reason, LostReason::Expired);
    // It fires at the conservative local deadline, before the store's
    // expiry (which counts from after the request started).
    assert!(guard.deadline() < taken + Duration::from_millis(200));
    assert!(
        Instant::now() >= guard.deadline(),
        "fired before the deadline"
    );
    (name, guard)
}

/// `lost()` fires when the lease expires and another takes the lock, and
/// the late release reports the loss.
pub async fn lost_fires_and_the_lock_passes_on(f: &dyn Fixture) {
    let (name, guard) = lose_by_the_deadline(f).await;
    let thief_store = f.store().await;
    let thief = thief_store
        .acquire(&name, &short(5_000).wait(Duration::from_secs(2)))
        .await
        .unwrap();
    assert!(thief.fence() > guard.fence());
    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    thief.release().await.unwrap();
}

/// On a session lock, `lost()` fires at the deadline, nobody can take the
/// lock while the session lives, and the late release reports the loss.
pub async fn lost_fires_on_a_session_lock(f: &dyn Fixture) {
    let (name, guard) = lose_by_the_deadline(f).await;
    let thief_store = f.store().await;
    let early = thief_store
        .acquire(&name, &short(5_000).wait(Duration::from_millis(200)))
        .await;
    assert!(matches!(early, Err(Error::TimedOut { .. })), "{early:?}");
    let fence = guard.fence();
    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    // Free soon after: the thief's timed-out wait above may have been
    // granted on its own session as the holder let go (MySQL's named
    // locks wait on the server); that session is ended, and the server
    // frees the lock when it sees it closed, a moment later on a busy
    // machine.
    let thief = thief_store
        .acquire(&name, &short(5_000).wait(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(thief.fence() > fence);
    thief.release().await.unwrap();
}

/// `acquire` with a wait limit gives up with `TimedOut`, not before.
pub async fn acquire_times_out(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("timeout");
    let holder = store.try_acquire(&name, &short(10_000)).await.unwrap();
    let began = Instant::now();
    let res = f
        .store()
        .await
        .acquire(&name, &short(1_000).wait(Duration::from_millis(150)))
        .await;
    let waited = began.elapsed();
    assert!(matches!(res, Err(Error::TimedOut { .. })), "{res:?}");
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    assert!(waited < Duration::from_millis(1_000), "{waited:?}");
    holder.release().await.unwrap();
}

/// Dropping a waiting `acquire` leaves no queue entry or ghost holder.
pub async fn cancelled_wait_leaves_nothing(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("cancel");
    let holder = store.try_acquire(&name, &short(10_000)).await.unwrap();
    let cancelled = tokio::time::timeout(
        Duration::from_millis(100),
        f.store().await.acquire(&name, &short(10_000)),
    )
    .await;
    assert!(cancelled.is_err(), "acquire should still have been waiting");
    holder.release().await.unwrap();
    let next = f
        .store()
        .await
        // A ghost would hold for its 10 s lease; a loaded machine takes a
        // free lock well within 3 s.
        .acquire(&name, &short(10_000).wait(Duration::from_secs(3)))
        .await
        .expect("a cancelled waiter kept the lock");
    next.release().await.unwrap();
}

/// `with_lock` cancels the work when the lease is lost.
pub async fn with_lock_cancels_work(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("scoped");
    let finished = Arc::new(AtomicUsize::new(0));
    let done = finished.clone();
    let began = Instant::now();
    let res = store
        .with_lock(&name, &short(150), |_lease| async move {
            tokio::time::sleep(Duration::from_secs(6)).await;
            done.fetch_add(1, Ordering::SeqCst);
        })
        .await;
    assert!(matches!(res, Err(Error::Lost { .. })), "{res:?}");
    // Cancelled at the lease's deadline, long before the work's end.
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(finished.load(Ordering::SeqCst), 0, "work ran on after loss");
    // And the happy path returns the work's output and frees the lock.
    let out = store
        .with_lock(&name, &short(5_000), |lease| async move { lease.fence })
        .await
        .unwrap();
    assert!(out > 0);
    assert!(store.inspect(&name).await.unwrap().is_none());
}

/// `inspect` and `list` show the holder and its fence, and nothing after
/// release.
pub async fn inspect_and_list(f: &dyn Fixture) {
    let store = f.store().await;
    let prefix = unique("inspect");
    let name = format!("{prefix}/a");
    let guard = store
        .try_acquire(&name, &short(5_000).label("tester"))
        .await
        .unwrap();
    let info = store.inspect(&name).await.unwrap().expect("held");
    assert_eq!(info.name, name);
    assert_eq!(info.owner, guard.lease().owner.to_string());
    if let Some(fence) = info.fence {
        assert_eq!(fence, guard.fence());
    }
    if store.capabilities().expires {
        let left = info.expires_in.expect("expiry");
        assert!(left <= Duration::from_millis(5_000) && left > Duration::from_secs(3));
    } else {
        assert_eq!(info.expires_in, None, "a session lock has no expiry");
    }
    let listed = store.list(&prefix).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, name);
    assert!(store.list("no-such-prefix-").await.unwrap().is_empty());
    guard.release().await.unwrap();
    assert!(store.inspect(&name).await.unwrap().is_none());
}

/// A guard dropped without release frees the lock soon, not at its TTL.
pub async fn drop_releases(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("drop");
    let guard = store.try_acquire(&name, &short(60_000)).await.unwrap();
    drop(guard);
    let next = store
        .acquire(&name, &short(5_000).wait(Duration::from_secs(2)))
        .await
        .expect("drop did not release");
    next.release().await.unwrap();
}

/// The seed's paused holder: a holder whose whole runtime stops (a GC
/// pause, a stopped VM) past its TTL loses the lock to another client,
/// which gets a larger fence; when the holder resumes, its `lost()` fires at
/// once and its release reports the loss. Renewal is on: the pause stops it.
pub async fn paused_holder_learns_it_lost(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("paused");
    let (acquired_tx, acquired_rx) = std::sync::mpsc::channel();
    let holder_store = store.clone();
    let holder_name = name.clone();
    let holder = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let opts = LockOptions::new().ttl(Duration::from_millis(300));
            let guard = holder_store.acquire(&holder_name, &opts).await.unwrap();
            acquired_tx.send(guard.fence()).unwrap();
            // The pause: nothing of this runtime runs, renewal included.
            std::thread::sleep(Duration::from_millis(900));
            let lost_at_once = guard.is_lost();
            let reason = tokio::time::timeout(Duration::from_millis(50), guard.lost()).await;
            let release = guard.release().await;
            (lost_at_once, reason, release)
        })
    });
    let old_fence = acquired_rx.recv().unwrap();
    let other = f
        .store()
        .await
        .acquire(&name, &short(5_000).wait(Duration::from_secs(3)))
        .await
        .expect("the lock never passed on from the paused holder");
    assert!(
        other.fence() > old_fence,
        "{} <= {old_fence}",
        other.fence()
    );
    let (lost_at_once, reason, release) = holder.join().unwrap();
    assert!(
        lost_at_once,
        "the resumed holder still believed it held the lock"
    );
    assert_eq!(
        reason.expect("lost() did not fire on resume"),
        LostReason::Expired
    );
    assert!(matches!(release, Err(Error::Lost { .. })), "{release:?}");
    other.release().await.unwrap();
}
