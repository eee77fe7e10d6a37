//! The checks. Each takes a fixture, so it runs unchanged on every backend.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockward::{Error, LockOptions, LostReason, OwnerId, Renewal, Store};

/// How a backend's stores are opened for the suite.
#[async_trait::async_trait]
pub trait Fixture: Send + Sync + 'static {
    /// A store handle on the backend under test. Each call may be a new
    /// connection, as another process would open; all see the same locks.
    async fn store(&self) -> Store;
    /// The URL of the backend under test.
    fn url(&self) -> String;
    /// The shortest time the server keeps a lease (etcd counts whole
    /// seconds); checks that wait for a server-side expiry wait this long.
    fn server_ttl_floor(&self) -> Duration {
        Duration::ZERO
    }
}

/// Instantiates every check for one backend. `$fixture` is an async fn
/// returning the backend's [`Fixture`].
#[macro_export]
macro_rules! conformance {
    ($fixture:path) => {
        $crate::conformance!(@tests $fixture;
            mutual_exclusion, fences_increase, non_owner_refused, expiry_frees,
            extend_keeps, renewal_keeps, waiter_wakes_promptly, fifo_where_claimed,
            lost_fires, acquire_times_out, cancelled_wait_leaves_nothing,
            with_lock_cancels_work, inspect_and_list, drop_releases, bad_input,
            paused_holder_learns_it_lost, local_waiters_in_order,
            paused_holders_write_is_refused, election_hands_over_on_resign, records,
            paused_leader_is_revoked_and_fenced, semaphore_limits_holders,
            idempotency_runs_once, versioned_records_compare_and_set,
            optimistic_updates_lose_nothing, rate_limits_hold);
    };
    (@tests $fixture:path; $($check:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $check() {
                let fixture = $fixture().await;
                $crate::suite::$check(&fixture).await;
            }
        )*
    };
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", OwnerId::random())
}

fn short(ttl_ms: u64) -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_millis(ttl_ms))
        .renewal(Renewal::Off)
}

/// 16 tasks, each on its own store handle, do an unprotected
/// read–sleep–write of a counter under the lock; the total must be exact
/// and no two may ever be inside at once.
pub async fn mutual_exclusion(f: &impl Fixture) {
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
pub async fn fences_increase(f: &impl Fixture) {
    let name = unique("fences");
    let mut store = f.store().await;
    let durable = store.capabilities().durable;
    let expires = store.capabilities().expires;
    // Long enough that a release reaches a loaded server before the TTL.
    let opts = short(300);
    let mut last = 0;
    for i in 0..1000 {
        if durable && i % 250 == 249 {
            store = f.store().await;
        }
        let guard = store.acquire(&name, &opts).await.expect("acquire");
        assert!(guard.fence() > last, "fence {} after {last}", guard.fence());
        last = guard.fence();
        if i % 200 == 199 && expires {
            // Let it expire instead of releasing it (dropping would release).
            std::mem::forget(guard);
        } else {
            guard.release().await.expect("release");
        }
    }
}

/// Release and extend by someone who does not hold the lock are refused,
/// and the holder keeps it.
pub async fn non_owner_refused(f: &impl Fixture) {
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
pub async fn expiry_frees(f: &impl Fixture) {
    let store = f.store().await;
    let name = unique("expiry");
    let guard = store.try_acquire(&name, &short(150)).await.unwrap();
    let first_fence = guard.fence();
    assert!(store.try_acquire(&name, &short(150)).await.is_err());
    let server_ttl = Duration::from_millis(150).max(f.server_ttl_floor());
    tokio::time::sleep(server_ttl + Duration::from_millis(100)).await;
    assert!(guard.is_lost(), "the holder's deadline passed");
    if !store.capabilities().expires {
        // A session lock outlives its TTL while its session lives.
        assert!(matches!(
            store.try_acquire(&name, &short(1_000)).await,
            Err(Error::Busy { .. })
        ));
        drop(guard);
    }
    let next = store
        .acquire(&name, &short(1_000).wait(Duration::from_secs(1)))
        .await
        .expect("free after TTL");
    assert!(next.fence() > first_fence);
    next.release().await.unwrap();
}

/// Extending before the TTL keeps the lock past the original expiry.
pub async fn extend_keeps(f: &impl Fixture) {
    let store = f.store().await;
    let name = unique("extend");
    let guard = store.try_acquire(&name, &short(300)).await.unwrap();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        guard.extend(None).await.expect("extend");
    }
    // 450 ms after a 300 ms lease was taken, it is still held.
    assert!(matches!(
        store.try_acquire(&name, &short(300)).await,
        Err(Error::Busy { .. })
    ));
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
}

/// Automatic renewal keeps the lock for many TTLs.
pub async fn renewal_keeps(f: &impl Fixture) {
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

/// A waiter wakes soon after the release: within 10 ms where the store
/// pushes wake-ups, within the polling bound where it does not.
pub async fn waiter_wakes_promptly(f: &impl Fixture) {
    let store = f.store().await;
    let pushed = store.capabilities().pushed_wakeups;
    let name = unique("wake");
    let mut handoffs = Vec::new();
    for _ in 0..10 {
        let guard = store.try_acquire(&name, &short(10_000)).await.unwrap();
        let waiter_store = f.store().await;
        let waiter_name = name.clone();
        let waiter = tokio::spawn(async move {
            let g = waiter_store
                .acquire(&waiter_name, &short(10_000))
                .await
                .unwrap();
            let at = Instant::now();
            g.release().await.unwrap();
            at
        });
        // Let the waiter settle into waiting (and a poller back off).
        tokio::time::sleep(Duration::from_millis(60)).await;
        let released = Instant::now();
        guard.release().await.unwrap();
        let acquired = waiter.await.unwrap();
        handoffs.push(acquired.saturating_duration_since(released));
    }
    handoffs.sort();
    let median = handoffs[handoffs.len() / 2];
    eprintln!(
        "handoff on {}: median {median:?}, max {:?}",
        f.url(),
        handoffs.last().unwrap()
    );
    let bound = if pushed {
        Duration::from_millis(10)
    } else {
        Duration::from_millis(75)
    };
    assert!(median < bound, "median handoff {median:?} over {bound:?}");
}

/// Where the backend claims FIFO, waiters acquire in the order they came.
pub async fn fifo_where_claimed(f: &impl Fixture) {
    let store = f.store().await;
    if !store.capabilities().fifo {
        // Not claimed: check only that every waiter gets the lock.
        eprintln!("{} does not claim FIFO; checking liveness only", f.url());
    }
    let mut waiters = Vec::new();
    for _ in 0..6 {
        waiters.push(f.store().await);
    }
    // FIFO is the order in which waiters reach the store; the spacing must
    // exceed a waiter's registration (a new connection, with SCRAM, for
    // PostgreSQL's advisory queue) on a loaded machine.
    let order = acquisition_order(&store, waiters, Duration::from_millis(100)).await;
    assert_eq!(order.len(), 6);
    if store.capabilities().fifo {
        assert_eq!(order, vec![0, 1, 2, 3, 4, 5], "not FIFO");
    }
}

/// `lost()` fires when the lease expires and another takes the lock, and
/// the late release reports the loss.
pub async fn lost_fires(f: &impl Fixture) {
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
    let thief_store = f.store().await;
    if !store.capabilities().expires {
        // Nobody can take a session lock while its session lives; the late
        // release still reports the loss.
        let early = thief_store
            .acquire(&name, &short(5_000).wait(Duration::from_millis(200)))
            .await;
        assert!(matches!(early, Err(Error::TimedOut { .. })), "{early:?}");
        let fence = guard.fence();
        assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
        let thief = thief_store.try_acquire(&name, &short(5_000)).await.unwrap();
        assert!(thief.fence() > fence);
        thief.release().await.unwrap();
        return;
    }
    let thief = thief_store
        .acquire(&name, &short(5_000).wait(Duration::from_secs(2)))
        .await
        .unwrap();
    assert!(thief.fence() > guard.fence());
    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    thief.release().await.unwrap();
}

/// `acquire` with a wait limit gives up with `TimedOut`, not before.
pub async fn acquire_times_out(f: &impl Fixture) {
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
pub async fn cancelled_wait_leaves_nothing(f: &impl Fixture) {
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
        .acquire(&name, &short(10_000).wait(Duration::from_millis(500)))
        .await
        .expect("a cancelled waiter kept the lock");
    next.release().await.unwrap();
}

/// `with_lock` cancels the work when the lease is lost.
pub async fn with_lock_cancels_work(f: &impl Fixture) {
    let store = f.store().await;
    let name = unique("scoped");
    let finished = Arc::new(AtomicUsize::new(0));
    let done = finished.clone();
    let began = Instant::now();
    let res = store
        .with_lock(&name, &short(150), |_lease| async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            done.fetch_add(1, Ordering::SeqCst);
        })
        .await;
    assert!(matches!(res, Err(Error::Lost { .. })), "{res:?}");
    assert!(began.elapsed() < Duration::from_secs(1));
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
pub async fn inspect_and_list(f: &impl Fixture) {
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
pub async fn drop_releases(f: &impl Fixture) {
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

/// Every bad input gets its typed error before anything reaches the store.
pub async fn bad_input(f: &impl Fixture) {
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

/// The seed's paused holder: a holder whose whole runtime stops (a GC
/// pause, a stopped VM) past its TTL loses the lock to another client,
/// which gets a larger fence; when the holder resumes, its `lost()` fires at
/// once and its release reports the loss. Renewal is on: the pause stops it.
pub async fn paused_holder_learns_it_lost(f: &impl Fixture) {
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

/// Waiters on one store handle queue locally and acquire in the order they
/// came, on every backend (the store's waiting line).
pub async fn local_waiters_in_order(f: &impl Fixture) {
    let store = f.store().await;
    let waiters = vec![store.clone(); 5];
    let order = acquisition_order(&store, waiters, Duration::from_millis(20)).await;
    assert_eq!(order, vec![0, 1, 2, 3, 4]);
}

/// Holds a fresh lock on `holder`, starts one waiter per store in
/// `waiters`, `spacing` apart, releases, and returns the order in which the
/// waiters acquired.
async fn acquisition_order(holder: &Store, waiters: Vec<Store>, spacing: Duration) -> Vec<usize> {
    let name = unique("order");
    let held = holder.try_acquire(&name, &short(10_000)).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, s) in waiters.into_iter().enumerate() {
        let (name, order) = (name.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let g = s.acquire(&name, &short(10_000)).await.unwrap();
            order.lock().unwrap().push(i);
            g.release().await.unwrap();
        }));
        tokio::time::sleep(spacing).await;
    }
    held.release().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("waiter starved")
            .unwrap();
    }
    let order = order.lock().unwrap().clone();
    order
}

/// The seed's scenario on every fenced resource: holder A takes the lock,
/// is paused past its TTL, B takes it (a larger fence) and writes, A
/// resumes and writes with its old fence: refused, and B's value stays.
pub async fn paused_holders_write_is_refused(f: &impl Fixture) {
    let store = f.store().await;
    let name = unique("fenced");
    let a = store.try_acquire(&name, &short(300)).await.unwrap();
    if !store.capabilities().expires {
        // A paused holder keeps a session lock: no second holder, no stale
        // write. (The PostgreSQL tests end the session instead.)
        tokio::time::sleep(Duration::from_millis(400)).await;
        let b = f.store().await.try_acquire(&name, &short(5_000)).await;
        assert!(matches!(b, Err(Error::Busy { .. })), "{b:?}");
        return;
    }
    // A is paused: no renewal, nothing sent. B waits for the lock.
    let b = f
        .store()
        .await
        .acquire(&name, &short(5_000).wait(Duration::from_secs(5)))
        .await
        .expect("B never got the lock");
    assert!(b.fence() > a.fence(), "{} <= {}", b.fence(), a.fence());
    for (kind, resource) in crate::resources::all().await {
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

/// Leader election on this backend: one leader; a resign hands over to a
/// waiting candidate at once (pushed backends: within 100 ms), with a larger
/// epoch; `revoked` has not fired for a healthy leader.
pub async fn election_hands_over_on_resign(f: &impl Fixture) {
    use lockward::recipe::{Candidate, ElectionConfig};
    let config = ElectionConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
    };
    let name = unique("election");
    let a = Candidate::new(f.store().await, &name, "node-a", config).unwrap();
    let b = Candidate::new(f.store().await, &name, "node-b", config).unwrap();
    let leading = a.campaign().await.unwrap();
    assert_eq!(b.leader().await.unwrap().as_deref(), Some("node-a"));
    assert!(b.try_campaign().await.is_err(), "two leaders");
    let waiting = tokio::spawn(async move { (b.campaign().await, Instant::now()) });
    tokio::time::sleep(Duration::from_millis(700)).await;
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
        assert!(handover < Duration::from_millis(100), "{handover:?}");
    }
    assert!(next.epoch() > epoch);
    assert_eq!(a.leader().await.unwrap().as_deref(), Some("node-b"));
    next.resign().await.unwrap();
    // The timing is checked: renew deadline below the lease.
    let bad = ElectionConfig {
        renew_deadline: Duration::from_secs(3),
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

/// The record store recipes use (the cron ledger): insert only if absent,
/// overwrite, list by prefix, expire; records never touch locks.
pub async fn records(f: &impl Fixture) {
    let store = f.store().await;
    let backend = store.backend().clone();
    let prefix = unique("ledger");
    let key = |k: &str| lockward::Name::new(format!("{prefix}/{k}")).unwrap();
    let long = Duration::from_secs(60);
    assert!(backend
        .insert_record(&key("a"), "first", long)
        .await
        .unwrap());
    assert!(
        !backend
            .insert_record(&key("a"), "second", long)
            .await
            .unwrap(),
        "inserted twice"
    );
    backend.put_record(&key("b"), "x", long).await.unwrap();
    backend
        .put_record(&key("b"), "y:with/odd%chars", long)
        .await
        .unwrap();
    let all = backend.records(&prefix).await.unwrap();
    assert_eq!(
        all,
        vec![
            (format!("{prefix}/a"), "first".to_string()),
            (format!("{prefix}/b"), "y:with/odd%chars".to_string())
        ]
    );
    assert_eq!(
        backend.records(&format!("{prefix}/b")).await.unwrap().len(),
        1
    );
    // A lock of the same name is unaffected, and lists no records.
    let g = store
        .try_acquire(format!("{prefix}/a"), &short(5_000))
        .await
        .unwrap();
    assert_eq!(store.list(&prefix).await.unwrap().len(), 1);
    g.release().await.unwrap();
    // Expiry.
    let ttl = Duration::from_millis(300).max(f.server_ttl_floor() / 2);
    assert!(backend
        .insert_record(&key("c"), "gone soon", ttl)
        .await
        .unwrap());
    tokio::time::sleep(ttl + f.server_ttl_floor() / 2 + Duration::from_millis(300)).await;
    assert!(
        backend
            .records(&format!("{prefix}/c"))
            .await
            .unwrap()
            .is_empty(),
        "record outlived its TTL"
    );
    assert!(backend
        .insert_record(&key("c"), "again", long)
        .await
        .unwrap());
}

/// A leader whose whole runtime stops past its lease: another candidate is
/// elected with a larger epoch (and an observer sees it); when the old
/// leader resumes, `revoked` fires at once and its write with the old epoch
/// is refused.
pub async fn paused_leader_is_revoked_and_fenced(f: &impl Fixture) {
    use lockward::fence::{FencedResource, MemoryRegister};
    use lockward::recipe::{Candidate, ElectionConfig};
    let store = f.store().await;
    if !store.capabilities().expires {
        // A paused leader keeps a session lock: nobody else is elected.
        return;
    }
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
/// more than 3 inside at once; every task gets a permit in the end, and a
/// holder that stops renewing gives its permit back after its TTL.
pub async fn semaphore_limits_holders(f: &impl Fixture) {
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
            tokio::time::sleep(Duration::from_millis(30)).await;
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
    for _ in 0..3 {
        held.push(sem.try_acquire(&short(300)).await.unwrap());
    }
    let mut slots: Vec<u32> = held.iter().map(|p| p.slot()).collect();
    slots.sort();
    assert_eq!(slots, vec![0, 1, 2]);
    assert!(matches!(
        sem.try_acquire(&short(300)).await,
        Err(Error::Busy { .. })
    ));
    if !f.store().await.capabilities().expires {
        // Session locks: the permits come back when their holders end.
        drop(held);
        let back = sem
            .acquire(&short(1_000).wait(Duration::from_secs(5)))
            .await
            .expect("a dropped permit never came back");
        back.release().await.unwrap();
        return;
    }
    // Nobody renews: the permits come back after the TTL.
    let wait = Duration::from_millis(300).max(f.server_ttl_floor()) + Duration::from_secs(3);
    let back = sem
        .acquire(&short(1_000).wait(wait))
        .await
        .expect("an expired permit never came back");
    let old = held.iter().find(|p| p.slot() == back.slot()).unwrap();
    assert!(back.guard().fence() > old.guard().fence());
    back.release().await.unwrap();
    assert!(Semaphore::new(f.store().await, "x", 0).is_err());
}

/// An idempotency key: of 6 concurrent duplicates exactly one runs, the
/// others are told it is in progress; later duplicates get the stored
/// result; a failed run stores nothing and can be retried.
pub async fn idempotency_runs_once(f: &impl Fixture) {
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

/// A versioned record: a write names the version it read; a stale version
/// is refused, and versions only grow.
pub async fn versioned_records_compare_and_set(f: &impl Fixture) {
    let store = f.store().await;
    let backend = store.backend();
    let key = lockward::Name::new(unique("stock")).unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(backend.read_versioned(&key).await.unwrap(), None);
    let v1 = backend
        .write_versioned(&key, 0, "5", ttl)
        .await
        .unwrap()
        .expect("created");
    assert_eq!(
        backend.write_versioned(&key, 0, "9", ttl).await.unwrap(),
        None,
        "created twice"
    );
    let read = backend.read_versioned(&key).await.unwrap().unwrap();
    assert_eq!((read.value.as_str(), read.version), ("5", v1));
    let v2 = backend
        .write_versioned(&key, v1, "4", ttl)
        .await
        .unwrap()
        .expect("updated");
    assert!(v2 > v1);
    assert_eq!(
        backend.write_versioned(&key, v1, "3", ttl).await.unwrap(),
        None,
        "stale write accepted"
    );
    assert_eq!(
        backend.read_versioned(&key).await.unwrap().unwrap().value,
        "4"
    );
    // A versioned record is not a plain record, nor a lock.
    assert!(backend.records(key.as_str()).await.unwrap().is_empty());
    assert!(store.inspect(key.as_str()).await.unwrap().is_none());
}

/// 8 tasks, each on its own store handle, add 1 to one counter 10 times
/// with optimistic updates: nothing is lost.
pub async fn optimistic_updates_lose_nothing(f: &impl Fixture) {
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
pub async fn rate_limits_hold(f: &impl Fixture) {
    use lockward::recipe::{Decision, FixedWindow, Gcra};
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
