//! etcd-specific behaviour: interoperability with `etcdctl lock`, leader
//! failover, an unreachable cluster.

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockward::{Error, LockOptions, Renewal, Store};
use lockward_testkit::EtcdCluster;

fn opts(ttl_ms: u64) -> LockOptions {
    LockOptions::new().ttl(Duration::from_millis(ttl_ms))
}

/// Waits until `path` exists.
fn wait_file(path: &std::path::Path, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_lock_waits_for_lockward() {
    let etcd = EtcdCluster::start_single();
    let store = Store::open(&etcd.url()).await.unwrap();
    let guard = store.try_acquire("interop", &opts(10_000)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("etcdctl-ran");
    let mut etcdctl = etcd
        .etcdctl_command(&[
            "lock",
            "lockward/interop",
            "touch",
            marker.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        !wait_file(&marker, Duration::from_millis(800)),
        "etcdctl lock ran while lockward held the lock"
    );
    guard.release().await.unwrap();
    assert!(
        wait_file(&marker, Duration::from_secs(5)),
        "etcdctl lock never ran after the release"
    );
    etcdctl.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lockward_waits_for_etcdctl_lock() {
    let etcd = EtcdCluster::start_single();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("etcdctl-holds");
    let script = format!("touch {}; sleep 1.5", marker.display());
    let mut etcdctl = etcd
        .etcdctl_command(&["lock", "lockward/interop", "--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_file(&marker, Duration::from_secs(5)),
        "etcdctl never took the lock"
    );
    let store = Store::open(&etcd.url()).await.unwrap();
    assert!(matches!(
        store.try_acquire("interop", &opts(5_000)).await,
        Err(Error::Busy { .. })
    ));
    let info = store
        .inspect("interop")
        .await
        .unwrap()
        .expect("etcdctl's holder is visible");
    assert!(info.fence.is_some());
    let began = Instant::now();
    let guard = store
        .acquire("interop", &opts(5_000).wait(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(
        began.elapsed() > Duration::from_millis(500),
        "acquired while etcdctl held it"
    );
    assert!(guard.fence() > info.fence.unwrap());
    etcdctl.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_killed_never_two_holders_and_waiters_proceed() {
    let mut etcd = EtcdCluster::start_three();
    let url = etcd.url();
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (url, inside, overlaps, done) =
            (url.clone(), inside.clone(), overlaps.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            let store = Store::open(&url).await.unwrap();
            let until = Instant::now() + Duration::from_secs(6);
            while Instant::now() < until {
                let o = opts(2_000)
                    .renewal(Renewal::Auto)
                    .wait(Duration::from_secs(5));
                let guard = match store.acquire("failover", &o).await {
                    Ok(g) => g,
                    Err(e) => {
                        eprintln!("acquire failed at {:?}: {e}", Instant::now());
                        continue;
                    }
                };
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                // Hold it across the failover, unless told it is lost.
                tokio::select! {
                    _ = guard.lost() => {}
                    _ = tokio::time::sleep(Duration::from_millis(150)) => {}
                }
                inside.fetch_sub(1, Ordering::SeqCst);
                if guard.release().await.is_ok() {
                    done.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let before = done.load(Ordering::SeqCst);
    let leader = etcd.leader().expect("a leader");
    etcd.kill9(leader);
    let killed_at = Instant::now();
    for w in workers {
        w.await.unwrap();
    }
    let after = done.load(Ordering::SeqCst);
    eprintln!(
        "cycles before the kill: {before}, after: {}, run ended {:?} after it",
        after - before,
        killed_at.elapsed()
    );
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    assert!(
        after > before + 3,
        "waiters did not proceed after the failover ({before} -> {after})"
    );
}

#[tokio::test]
async fn unreachable_cluster_is_a_clear_error() {
    let port = lockward_testkit::free_port();
    let began = Instant::now();
    let err = Store::open(&format!("etcd://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_elect_and_lockward_share_one_leadership() {
    let etcd = EtcdCluster::start_single();
    let store = Store::open(&etcd.url()).await.unwrap();
    // lockward leads; `etcdctl elect -l` observes its identity.
    let leader = store
        .try_acquire("leader", &opts(5_000).label("node-a"))
        .await
        .unwrap();
    let mut observer = etcd
        .etcdctl_command(&["elect", "-l", "lockward/leader"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut candidate = etcd
        .etcdctl_command(&["elect", "lockward/leader", "node-b"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // etcdctl's candidate queues behind lockward (once its process is up).
    let until = Instant::now() + Duration::from_secs(30);
    let info = loop {
        let info = store.inspect("leader").await.unwrap().unwrap();
        if info.waiters == Some(1) || Instant::now() > until {
            break info;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(info.label.as_deref(), Some("node-a"));
    assert_eq!(info.waiters, Some(1), "etcdctl's candidate never queued");
    // Resign: etcdctl's candidate is elected; lockward now waits for it.
    leader.release().await.unwrap();
    // Bounds a loaded machine meets: etcdctl is a process of its own.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let info = store.inspect("leader").await.unwrap();
        if info.as_ref().and_then(|i| i.label.as_deref()) == Some("node-b") {
            break;
        }
        assert!(
            Instant::now() < until,
            "etcdctl's candidate never led: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(
        store
            .try_acquire("leader", &opts(5_000).label("node-c"))
            .await,
        Err(Error::Busy { .. })
    ));
    // etcdctl resigns on SIGINT; lockward's candidate takes over.
    unsafe { libc::kill(candidate.id() as i32, libc::SIGINT) };
    let next = store
        .acquire(
            "leader",
            &opts(5_000).label("node-c").wait(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    candidate.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    observer.kill().unwrap();
    let seen = String::from_utf8_lossy(&observer.wait_with_output().unwrap().stdout).to_string();
    for identity in ["node-a", "node-b", "node-c"] {
        assert!(
            seen.contains(identity),
            "observer missed {identity}: {seen}"
        );
    }
    next.release().await.unwrap();
}

#[tokio::test]
async fn authentication_works_and_a_wrong_password_is_clear() {
    let etcd = EtcdCluster::start_single();
    etcd.etcdctl(&["user", "add", "root:root-secret"]);
    etcd.etcdctl(&["auth", "enable"]);
    let endpoint = &etcd.endpoints()[0];
    let store = Store::open(&format!("etcd://root:root-secret@{endpoint}"))
        .await
        .expect("authenticated connect");
    let guard = store.try_acquire("authed", &opts(5_000)).await.unwrap();
    assert!(
        !store.address().contains("root-secret"),
        "{}",
        store.address()
    );
    guard.release().await.unwrap();
    let err = Store::open(&format!("etcd://root:wrong-secret@{endpoint}"))
        .await
        .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(matches!(err, Error::Denied { .. }), "{shown}");
    assert!(!shown.contains("wrong-secret"), "password leaked: {shown}");
    assert!(shown.contains("auth"), "{shown}");
    // Without credentials, the server refuses too.
    assert!(Store::open(&format!("etcd://{endpoint}")).await.is_err());
}

#[tokio::test]
async fn extend_past_the_granted_lease_is_refused() {
    let etcd = EtcdCluster::start_single();
    let store = Store::open(&etcd.url()).await.unwrap();
    let guard = store
        .try_acquire("extend", &opts(2_000).renewal(Renewal::Off))
        .await
        .unwrap();
    guard
        .extend(Some(Duration::from_millis(1_500)))
        .await
        .expect("within the lease");
    let err = guard
        .extend(Some(Duration::from_secs(30)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument { what: "ttl", .. }),
        "{err:?}"
    );
    // The deadline did not move past the server's lease.
    assert!(guard.deadline() < Instant::now() + Duration::from_secs(2));
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_below_a_fence_seen_before_is_refused_after_a_restore() {
    let mut etcd = EtcdCluster::start_single();
    let store = Store::open(&etcd.url()).await.unwrap();
    let opts = LockOptions::new()
        .ttl(Duration::from_secs(30))
        .renewal(Renewal::Off);
    let cycle = |store: Store| {
        let opts = opts.clone();
        async move {
            let guard = store.try_acquire("restored", &opts).await?;
            let fence = guard.fence();
            guard.release().await?;
            Ok::<u64, Error>(fence)
        }
    };
    cycle(store.clone()).await.unwrap();
    let snapshot = tokio::task::block_in_place(|| etcd.save_snapshot());
    let mut last = 0;
    for _ in 0..5 {
        last = cycle(store.clone()).await.unwrap();
    }
    // Last night's backup comes back: revisions go back with it.
    tokio::task::block_in_place(|| etcd.restore_snapshot(&snapshot));
    let refused = loop {
        // The handle reconnects to the restored member.
        match cycle(store.clone()).await {
            Err(Error::Unavailable { .. }) => tokio::time::sleep(Duration::from_millis(50)).await,
            other => break other,
        }
    };
    match refused {
        Err(Error::Protocol { message, .. }) => assert!(
            message.contains(&format!("not above fence {last} granted for it before"))
                && message.contains("the store went back"),
            "{message}"
        ),
        other => panic!("a fence at or below {last} was handed out: {other:?}"),
    }
    // The refused grant was given back: nobody holds the lock.
    assert!(store.inspect("restored").await.unwrap().is_none());
    // A handle that never saw the old fences cannot tell: a new process
    // restoring without --bump-revision is what docs/fences.md warns of.
    let fresh = Store::open(&etcd.url()).await.unwrap();
    assert!(cycle(fresh).await.unwrap() <= last);
}
