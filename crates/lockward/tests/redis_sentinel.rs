//! `redis+sentinel://` through failovers: eight clients take one lock in a
//! loop and add one to a fenced counter while the primary is killed with
//! kill -9 twice. The clients go on soon after each failover, none hangs,
//! the fences the counter accepted only grow, and the counter equals the
//! writes it acknowledged. Also: the URL's errors, and `doctor`'s view of
//! the sentinels.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockward::fence::{FencedResource, MemoryRegister};
use lockward::{Error, LockOptions, Store};
use lockward_testkit::RedisSentinels;

/// An acknowledged write: when, with which fence, and the value written.
type Acked = (Instant, u64, u64);

async fn client(
    url: String,
    counter: Arc<MemoryRegister>,
    acked: Arc<Mutex<Vec<Acked>>>,
    stop: Arc<AtomicBool>,
) {
    let store = loop {
        match Store::open(&url).await {
            Ok(store) => break store,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let opts = LockOptions::new()
        .ttl(Duration::from_secs(2))
        .wait(Duration::from_secs(2));
    while !stop.load(Ordering::SeqCst) {
        let Ok(guard) = store.acquire("sentinel-counter", &opts).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let fence = guard.fence();
        // Claim, read, write: a holder whose lock a failover lost cannot
        // overwrite a newer holder's count.
        if counter.claim("count", fence).await.is_ok() {
            let value = match counter.read("count").await {
                Ok(Some(v)) => String::from_utf8_lossy(&v.value).parse().unwrap_or(0),
                _ => 0,
            };
            let next: u64 = value + 1;
            if counter
                .write("count", next.to_string().as_bytes(), fence)
                .await
                .is_ok()
            {
                acked.lock().unwrap().push((Instant::now(), fence, next));
            }
        }
        let _ = guard.release().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_go_on_through_two_failovers_and_the_fenced_count_is_exact() {
    let mut set = tokio::task::block_in_place(|| RedisSentinels::start(2));
    let counter = Arc::new(MemoryRegister::new());
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(client(
                set.url(),
                counter.clone(),
                acked.clone(),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut failovers = Vec::new();
    for _ in 0..2 {
        let killed = Instant::now();
        let (old, new) = tokio::task::block_in_place(|| set.kill_primary());
        let promoted = Instant::now();
        failovers.push((killed, promoted));
        eprintln!(
            "primary {old} killed; {new} promoted after {:?}",
            promoted - killed
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        // The old primary comes back; the sentinels make it a replica.
        tokio::task::block_in_place(|| set.restart_node(old));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        tokio::time::timeout(Duration::from_secs(10), c)
            .await
            .expect("a client hung")
            .unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 20, "only {} writes", acked.len());
    // Each failover: the clients go on within the failover's time + 2 s.
    for (killed, promoted) in &failovers {
        let next = acked
            .iter()
            .find(|(at, ..)| at > promoted)
            .map(|(at, ..)| *at)
            .expect("no write after a failover");
        let gap = next - *killed;
        let budget = (*promoted - *killed) + Duration::from_secs(2);
        eprintln!("first write {gap:?} after the kill (budget {budget:?})");
        assert!(gap <= budget, "{gap:?} over {budget:?}");
    }
    // The fences the counter accepted only grow, and it holds every
    // acknowledged write.
    for pair in acked.windows(2) {
        assert!(
            pair[1].1 > pair[0].1,
            "fence {} after {}",
            pair[1].1,
            pair[0].1
        );
    }
    let count = counter.read("count").await.unwrap().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&count.value)
            .parse::<usize>()
            .unwrap(),
        acked.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_a_release_on_the_new_primary() {
    let mut set = tokio::task::block_in_place(|| RedisSentinels::start(1));
    let url = set.url();
    let store = Store::open(&url).await.unwrap();
    // A waiter subscribed before the failover is told of a release after
    // it, pushed on the new primary (not found by its safety net).
    let waiter_store = Store::open(&url).await.unwrap();
    let holder = store
        .try_acquire(
            "sentinel-wake",
            &LockOptions::new().ttl(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    let waiter = tokio::spawn(async move {
        let got = waiter_store
            .acquire(
                "sentinel-wake",
                &LockOptions::new().wait(Duration::from_secs(60)),
            )
            .await;
        (got.map(|g| g.fence()), Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::task::block_in_place(|| set.kill_primary());
    // The lock was lost with the primary or replicated to the new one;
    // either way the waiter gets it, with a larger fence.
    let held = holder.fence();
    let _ = holder.release().await;
    let released = Instant::now();
    let (fence, at) = tokio::time::timeout(Duration::from_secs(40), waiter)
        .await
        .expect("the waiter never got the lock")
        .unwrap();
    let fence = fence.expect("the waiter's grant");
    assert!(fence > held, "{fence} after {held}");
    eprintln!(
        "the waiter got the lock {:?} after the release",
        at - released
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_never_locks_on_the_old_primary_restarted_empty() {
    let mut set = tokio::task::block_in_place(|| RedisSentinels::start(1));
    let store = Store::open(&set.url()).await.unwrap();
    let opts = LockOptions::new().ttl(Duration::from_secs(60));
    store
        .try_acquire("warm", &opts)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    // A client that keeps taking locks, as a busy service does, through
    // the failover and the old primary's return.
    let stop = Arc::new(AtomicBool::new(false));
    let taker = {
        let (store, stop, opts) = (store.clone(), stop.clone(), opts.clone());
        tokio::spawn(async move {
            let (mut taken, mut held) = (Vec::new(), Vec::new());
            for i in 0.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let name = format!("split-{i}");
                if let Ok(guard) = store.try_acquire(&name, &opts).await {
                    taken.push((Instant::now(), name));
                    // Kept: the check below looks for every one of them.
                    held.push(guard);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (taken, held)
        })
    };
    let old = set.primary_port().unwrap();
    set.node(old).unwrap().kill9();
    let (_, new) = tokio::task::block_in_place(|| set.await_failover(old));
    // The old primary comes back empty, calling itself a primary until the
    // sentinels make it a replica: the client's connection, reconnecting
    // to its old address, must not take locks there.
    tokio::task::block_in_place(|| set.restart_node(old));
    let back = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    let (taken, _held) = taker.await.unwrap();
    let after: Vec<&String> = taken
        .iter()
        .filter(|(at, _)| *at > back)
        .map(|(_, n)| n)
        .collect();
    assert!(
        after.len() > 10,
        "only {} locks after the failover",
        after.len()
    );
    let primary = set.node(new).unwrap();
    for name in after {
        assert_eq!(
            primary.cli(&["EXISTS", &format!("lockward:{name}")]),
            "1",
            "{name} was taken on {old}, not on the primary {new} the sentinels name"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sentinel_urls_and_doctor() {
    for (url, says) in [
        ("redis+sentinel://127.0.0.1:1", "name the primary"),
        ("redis+sentinel://127.0.0.1:1/x?cluster=1", "cluster"),
    ] {
        let err = Store::open(url).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(err.to_string().contains(says), "{err}");
    }
    // A password for the sentinels is never shown.
    let parsed: lockward::StoreUrl =
        "redis+sentinel://app:pw@127.0.0.1:1/p?sentinel_password=topsecret"
            .parse()
            .unwrap();
    let shown = format!("{parsed} {parsed:?}");
    assert!(
        !shown.contains("topsecret") && !shown.contains(":pw@"),
        "{shown}"
    );
    // No sentinel answers: unavailable, quickly.
    let began = Instant::now();
    let port = lockward_testkit::free_port();
    let err = Store::open(&format!("redis+sentinel://127.0.0.1:{port}/p"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(began.elapsed() < Duration::from_secs(10));

    let set = tokio::task::block_in_place(|| RedisSentinels::start(1));
    let url: lockward::StoreUrl = set.url().parse().unwrap();
    let report = lockward::doctor::diagnose(&url).await;
    let shown = format!("{report:?}");
    assert!(shown.contains("3 of 3 name the primary"), "{shown}");
    assert!(shown.contains("sentinel quorum"), "{shown}");
    assert!(shown.contains("1 replicas can be promoted"), "{shown}");
    // A name the sentinels do not monitor: unavailable, saying so.
    let wrong = set.url().replace("lockward-primary", "nobody");
    let err = Store::open(&wrong).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_both_replicas_confirmed_survive_a_failover() {
    let mut set = tokio::task::block_in_place(|| RedisSentinels::start(2));
    let store = Store::open(&format!("{}?replicas=2", set.url()))
        .await
        .unwrap();
    let opts = LockOptions::new().ttl(Duration::from_secs(60));
    let mut held = Vec::new();
    for i in 0..50 {
        held.push(
            store
                .try_acquire(&format!("confirmed-{i}"), &opts)
                .await
                .unwrap(),
        );
    }
    // The primary dies right after the last acknowledged grant.
    let (_, new) = tokio::task::block_in_place(|| set.kill_primary());
    let primary = set.node(new).unwrap();
    for guard in &held {
        let key = format!("lockward:{}", guard.name().as_str());
        assert_eq!(
            primary.cli(&["GET", &key]),
            guard.lease().owner.to_string(),
            "the promoted replica lost the confirmed grant of {key}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_follows_a_failover_by_hand_while_the_old_primary_lives() {
    let mut set = tokio::task::block_in_place(|| RedisSentinels::start(1));
    let url = set.url();
    let store = Store::open(&url).await.unwrap();
    let waiter_store = Store::open(&url).await.unwrap();
    let opts = LockOptions::new().ttl(Duration::from_secs(30));
    let holder = store.try_acquire("by-hand", &opts).await.unwrap();
    let waiter = tokio::spawn(async move {
        let got = waiter_store
            .acquire("by-hand", &LockOptions::new().wait(Duration::from_secs(60)))
            .await;
        (got.map(|g| g.fence()), Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The old primary stays up and is made a replica; Sentinel ends the
    // clients' connections there (the waiter's subscription too) as it
    // reconfigures it, and the waiter follows to the new primary.
    tokio::task::block_in_place(|| set.fail_over_by_hand());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = holder.fence();
    holder.release().await.unwrap();
    let released = Instant::now();
    let (fence, at) = tokio::time::timeout(Duration::from_secs(40), waiter)
        .await
        .expect("the waiter never got the lock")
        .unwrap();
    assert!(fence.expect("the waiter's grant") > held);
    let after = at - released;
    eprintln!("the waiter got the lock {after:?} after the release");
    // Well before the holder's 30 s lease would have run out, which is
    // when a waiter left on the old primary would look again.
    assert!(after < Duration::from_secs(10), "{after:?}");
}

/// TLS everywhere (clients to the sentinels and to the data nodes, one CA
/// named by `ca=`): the primary is found and confirmed over TLS, a lock is
/// taken there, and after a failover by hand the next grant is on the new
/// primary with a larger fence. Plain text to those TLS ports fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_sentinel_finds_the_primary_and_follows_a_failover_over_tls() {
    let mut set = tokio::task::block_in_place(|| RedisSentinels::start_tls(1));
    let url = set.url();
    assert!(url.starts_with("rediss+sentinel://"), "{url}");
    let store = Store::open(&url).await.unwrap();
    let opts = LockOptions::new().ttl(Duration::from_secs(30));
    let first = store.try_acquire("over-tls", &opts).await.unwrap();
    let primary = set.primary_port().unwrap();
    let on_primary = tokio::task::block_in_place(|| {
        set.node(primary)
            .unwrap()
            .cli(&["GET", "lockward:over-tls"])
    });
    assert_eq!(
        on_primary,
        first.lease().owner.to_string(),
        "the lock is on the primary the sentinels name"
    );
    let fence = first.fence();
    first.release().await.unwrap();
    let (_, new) = tokio::task::block_in_place(|| set.fail_over_by_hand());
    // The old primary stays writable for seconds after a failover by hand,
    // until the sentinels reconfigure it; the client stops using it when it
    // hears their +switch-master, which comes as they name the new one.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let next = loop {
        match store.try_acquire("over-tls", &opts).await {
            Ok(guard) => break guard,
            Err(e) if Instant::now() < deadline => {
                eprintln!("during the failover: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no grant within 20 s of the failover: {e}"),
        }
    };
    assert!(next.fence() > fence, "fence {} after {fence}", next.fence());
    let on_new =
        tokio::task::block_in_place(|| set.node(new).unwrap().cli(&["GET", "lockward:over-tls"]));
    assert_eq!(
        on_new,
        next.lease().owner.to_string(),
        "the grant is on the new primary"
    );
    next.release().await.unwrap();
    // The same sentinels in plain text: refused, not hung.
    let plain = url
        .replacen("rediss+sentinel", "redis+sentinel", 1)
        .split('?')
        .next()
        .unwrap()
        .to_string();
    let refused = tokio::time::timeout(Duration::from_secs(15), Store::open(&plain)).await;
    assert!(
        matches!(refused, Ok(Err(Error::Unavailable { .. }))),
        "plain text to TLS sentinels: {refused:?}"
    );
}
