//! ZooKeeper-specific behaviour: Curator interoperability, failover,
//! disconnections, no herd among many waiters, authentication.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use lockward::recipe::{RwLock, Semaphore};
use lockward::{Error, LockOptions, LostReason, Renewal, Store};
use lockward_testkit::zookeeper::compile_curator_program;
use lockward_testkit::ZookeeperEnsemble;

fn opts(ttl_ms: u64) -> LockOptions {
    LockOptions::new().ttl(Duration::from_millis(ttl_ms))
}

/// A Java process holding a Curator `InterProcessMutex`, driven line by
/// line.
struct Curator {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// The compiled program, removed once the process is gone.
    _classes: tempfile::TempDir,
}

impl Curator {
    fn start(connect: &str, path: &str) -> Curator {
        Curator::start_as(connect, path, "mutex")
    }

    /// `side`: `mutex`, or `read` / `write` for a side of Curator's
    /// `InterProcessReadWriteLock`.
    fn start_as(connect: &str, path: &str, side: &str) -> Curator {
        let classes = tempfile::tempdir().unwrap();
        let source = include_str!("java/CuratorLock.java");
        let classpath = compile_curator_program(classes.path(), "CuratorLock", source);
        let mut child = Command::new("java")
            .args(["-cp", &classpath, "CuratorLock", connect, path, side])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the Curator program");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut curator = Curator {
            child,
            stdin,
            lines,
            _classes: classes,
        };
        assert_eq!(curator.answer(Duration::from_secs(30)), "READY");
        curator
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn answer(&mut self, within: Duration) -> String {
        self.lines
            .recv_timeout(within)
            .unwrap_or_else(|_| panic!("the Curator program did not answer within {within:?}"))
    }

    /// Sends `command` and waits for its answer.
    fn ask(&mut self, command: &str) -> String {
        self.send(command);
        self.answer(Duration::from_secs(10))
    }
}

impl Drop for Curator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_lockward_exclude_each_other() {
    let zk = ZookeeperEnsemble::start_single();
    let store = Store::open(&zk.url()).await.unwrap();
    let mut curator = Curator::start(&zk.endpoints().join(","), "/lockward/interop");

    // Curator holds: lockward is refused, then waits and gets it on release.
    assert_eq!(curator.ask("acquire"), "ACQUIRED");
    let busy = store.try_acquire("interop", &opts(10_000)).await;
    assert!(matches!(busy, Err(Error::Busy { .. })), "{busy:?}");
    let info = store.inspect("interop").await.unwrap().expect("held");
    assert!(info.owner.starts_with("(curator)"), "{info:?}");
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move {
            let got = store
                .acquire("interop", &opts(10_000).wait(Duration::from_secs(10)))
                .await;
            (got, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "lockward took a lock Curator holds");
    let released = Instant::now();
    assert_eq!(curator.ask("release"), "RELEASED");
    let (guard, got_at) = waiter.await.unwrap();
    let guard = guard.expect("lockward never got the lock after Curator released it");
    assert!(
        got_at.duration_since(released) < Duration::from_secs(1),
        "handoff took {:?}",
        got_at.duration_since(released)
    );

    // lockward holds: Curator is refused, then gets it on release.
    assert_eq!(curator.ask("try 300"), "BUSY");
    guard.release().await.unwrap();
    assert_eq!(curator.ask("try 5000"), "ACQUIRED");
    assert_eq!(curator.ask("release"), "RELEASED");
}

/// Curator's `InterProcessSemaphoreV2` and lockward's semaphore share one
/// set of permits, both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_semaphore_and_lockward_share_permits() {
    let zk = ZookeeperEnsemble::start_single();
    let store = Store::open(&zk.url()).await.unwrap();
    let sem = Semaphore::new(store.clone(), "sem-interop", 2).unwrap();
    assert!(sem.is_native());
    let connect = zk.endpoints().join(",");
    let mut curator = Curator::start_as(&connect, "/lockward/sem-interop", "semaphore:2");
    let full = |taken: Result<lockward::recipe::Permit, Error>| matches!(&taken, Err(Error::NoPermits { why, .. }) if why.ends_with("0 of 2 free"));

    // One each: both are full.
    assert_eq!(curator.ask("try 3000"), "ACQUIRED");
    let mine = sem.try_acquire(&opts(10_000)).await.unwrap();
    assert_eq!(sem.held().await.unwrap(), 2);
    assert!(full(sem.try_acquire(&opts(10_000)).await));
    assert_eq!(curator.ask("try 300"), "BUSY");

    // lockward gives its permit back: Curator gets it, and lockward is
    // refused while Curator holds both.
    mine.release().await.unwrap();
    assert_eq!(curator.ask("try 3000"), "ACQUIRED");
    assert!(full(sem.try_acquire(&opts(10_000)).await));
    let rows = store.list("sem-interop").await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter().all(|r| r.owner.starts_with("(curator)")),
        "{rows:?}"
    );

    // Curator gives both back: lockward takes both at once, and Curator
    // is refused.
    assert_eq!(curator.ask("release"), "RELEASED");
    assert_eq!(curator.ask("release"), "RELEASED");
    let both = sem.try_acquire_many(2, &opts(10_000)).await.unwrap();
    assert_eq!(curator.ask("try 300"), "BUSY");
    both.release().await.unwrap();
    assert_eq!(curator.ask("try 3000"), "ACQUIRED");
    assert_eq!(curator.ask("release"), "RELEASED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_read_write_lock_and_lockward_exclude_each_other() {
    let zk = ZookeeperEnsemble::start_single();
    let store = Store::open(&zk.url()).await.unwrap();
    let lock = RwLock::new(store.clone(), "rw-interop").unwrap();
    let connect = zk.endpoints().join(",");
    let mut reader = Curator::start_as(&connect, "/lockward/rw-interop", "read");
    let mut writer = Curator::start_as(&connect, "/lockward/rw-interop", "write");

    // Curator's writer holds: lockward can neither read nor write.
    assert_eq!(writer.ask("acquire"), "ACQUIRED");
    assert!(matches!(
        lock.try_read(&opts(10_000)).await,
        Err(Error::Busy { .. })
    ));
    assert!(matches!(
        lock.try_write(&opts(10_000)).await,
        Err(Error::Busy { .. })
    ));
    let waiting_reader = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.read(&opts(10_000).wait(Duration::from_secs(10))).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting_reader.is_finished(),
        "lockward read beside Curator's writer"
    );
    assert_eq!(writer.ask("release"), "RELEASED");
    let lockward_reader = waiting_reader
        .await
        .unwrap()
        .expect("read after Curator's writer left");

    // lockward reads: Curator's reader shares, Curator's writer waits.
    assert_eq!(reader.ask("try 5000"), "ACQUIRED");
    assert_eq!(writer.ask("try 300"), "BUSY");
    assert!(matches!(
        lock.try_write(&opts(10_000)).await,
        Err(Error::Busy { .. })
    ));
    assert_eq!(reader.ask("release"), "RELEASED");
    let read_fence = lockward_reader.fence();
    lockward_reader.release().await.unwrap();

    // lockward writes: Curator can neither read nor write.
    let lockward_writer = lock.write(&opts(10_000)).await.unwrap();
    assert!(lockward_writer.fence() > read_fence);
    assert_eq!(reader.ask("try 300"), "BUSY");
    assert_eq!(writer.ask("try 300"), "BUSY");
    lockward_writer.release().await.unwrap();
    assert_eq!(writer.ask("try 5000"), "ACQUIRED");
    // Curator's writer holds again: a lockward writer waits for it.
    assert!(matches!(
        lock.try_write(&opts(10_000)).await,
        Err(Error::Busy { .. })
    ));
    assert_eq!(writer.ask("release"), "RELEASED");
    assert_eq!(reader.ask("try 5000"), "ACQUIRED");
    assert_eq!(reader.ask("release"), "RELEASED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_killed_never_two_holders_and_waiters_proceed() {
    let mut zk = ZookeeperEnsemble::start_three();
    let url = format!("{}?session_timeout=3s", zk.url());
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (url, inside, overlaps, done) =
            (url.clone(), inside.clone(), overlaps.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            let store = Store::open(&url).await.unwrap();
            let until = Instant::now() + Duration::from_secs(12);
            while Instant::now() < until {
                let o = opts(2_000)
                    .renewal(Renewal::Auto)
                    .wait(Duration::from_secs(5));
                let guard = match store.acquire("failover", &o).await {
                    Ok(g) => g,
                    Err(e) => {
                        eprintln!("acquire failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
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
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let before = done.load(Ordering::SeqCst);
    let leader = zk.leader().expect("a leader");
    zk.kill9(leader);
    for w in workers {
        w.await.unwrap();
    }
    let after = done.load(Ordering::SeqCst);
    eprintln!(
        "cycles before the kill: {before}, after: {}",
        after - before
    );
    assert!(before > 3, "no progress before the kill");
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    assert!(
        after > before + 3,
        "waiters did not proceed after the failover ({before} -> {after})"
    );
}

/// A holder whose connection drops is told at its next renewal (as
/// "session ended", well before its deadline), and its node is cleaned up
/// once the connection is back, so others can take the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_raises_lost() {
    let mut zk = ZookeeperEnsemble::start_three();
    let endpoints = zk.endpoints();
    // This store knows one member only: when it dies, the store is cut off.
    let store = Store::open(&format!("zk://{}?session_timeout=20s", endpoints[0]))
        .await
        .unwrap();
    let others = Store::open(&format!(
        "zk://{},{}?session_timeout=20s",
        endpoints[1], endpoints[2]
    ))
    .await
    .unwrap();
    let guard = store
        .try_acquire(
            "cut",
            &opts(15_000).renewal(Renewal::Every(Duration::from_millis(500))),
        )
        .await
        .unwrap();
    let fence = guard.fence();
    zk.kill9(0);
    let cut = Instant::now();
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("lost() never fired after the connection dropped");
    assert_eq!(reason, LostReason::SessionEnded);
    assert!(
        cut.elapsed() < Duration::from_secs(10),
        "told after {:?}",
        cut.elapsed()
    );
    assert!(
        Instant::now() < guard.deadline(),
        "fired only at the deadline"
    );
    // The session lives on; once reconnected, the store deletes the node.
    zk.restart(0);
    let next = others
        .acquire("cut", &opts(5_000).wait(Duration::from_secs(15)))
        .await
        .expect("the lock was never freed after the reconnection");
    assert!(next.fence() > fence);
    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    next.release().await.unwrap();
}

/// 200 waiters on one lock, each on its own session: each watches only its
/// predecessor (the server holds one watch per waiter, and a release fires
/// exactly one), and they acquire in the order they queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_waiters_no_herd_and_fifo() {
    const WAITERS: usize = 200;
    let zk = ZookeeperEnsemble::start_single();
    let url = zk.url();
    let holder = Store::open(&url).await.unwrap();
    let first = holder.try_acquire("herd", &opts(30_000)).await.unwrap();
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut releases = Vec::new();
    for i in 0..WAITERS {
        let store = Store::open(&url).await.unwrap();
        let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
        releases.push(release_tx);
        let order_tx = order_tx.clone();
        tokio::spawn(async move {
            let guard = store
                .acquire("herd", &opts(30_000).wait(Duration::from_secs(120)))
                .await
                .unwrap();
            order_tx.send(i).unwrap();
            let _ = release_rx.await;
            guard.release().await.unwrap();
        });
        // Queue them one at a time, so their order is known.
        let until = Instant::now() + Duration::from_secs(10);
        while holder
            .inspect("herd")
            .await
            .unwrap()
            .and_then(|h| h.waiters)
            != Some(i + 1)
        {
            assert!(Instant::now() < until, "waiter {i} never queued");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let watches = |expected: usize| {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let n = zk.watch_count(0).expect("wchs");
            if n == expected || Instant::now() > until {
                return n;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    assert_eq!(watches(WAITERS), WAITERS, "one watch per waiter");
    first.release().await.unwrap();
    let mut order = Vec::new();
    let mut most_fired = 0;
    for (i, release) in releases.into_iter().enumerate() {
        let next = tokio::time::timeout(Duration::from_secs(10), order_rx.recv())
            .await
            .expect("the next waiter never got the lock")
            .unwrap();
        order.push(next);
        // Every waiter still queued holds its watch: the release fired one.
        let left = WAITERS - 1 - i;
        let held = watches(left);
        most_fired = most_fired.max((left + 1).saturating_sub(held));
        assert_eq!(held, left, "watches after release {i}");
        let _ = release.send(());
    }
    println!("watch events per release: at most {most_fired} (200 waiters)");
    assert_eq!(order, (0..WAITERS).collect::<Vec<_>>(), "not FIFO");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_authentication_protects_the_locks() {
    let zk = ZookeeperEnsemble::start_single();
    let endpoint = &zk.endpoints()[0];
    let app = Store::open(&format!("zk://app:app-secret@{endpoint}"))
        .await
        .unwrap();
    assert!(!app.address().contains("app-secret"), "{}", app.address());
    let guard = app.try_acquire("authed", &opts(5_000)).await.unwrap();
    // Another identity may not touch lockward's nodes (creator-only ACLs).
    let intruder = Store::open(&format!("zk://app:wrong-secret@{endpoint}"))
        .await
        .unwrap();
    let err = intruder
        .try_acquire("authed", &opts(5_000))
        .await
        .unwrap_err();
    let shown = format!("{err} {err:?}");
    // A refusal, which no wait retries.
    assert!(matches!(err, Error::Denied { .. }), "{shown}");
    assert!(shown.contains("not authorized"), "{shown}");
    assert!(!shown.contains("secret"), "password leaked: {shown}");
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_ttl_longer_than_the_session_is_refused() {
    let zk = ZookeeperEnsemble::start_single();
    let store = Store::open(&format!("{}?session_timeout=2s", zk.url()))
        .await
        .unwrap();
    let err = store.try_acquire("long", &opts(5_000)).await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument { what: "ttl", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("session_timeout"), "{err}");
    store.try_acquire("long", &opts(2_000)).await.unwrap();
}

/// The fence is the node's creation zxid: it keeps growing when the lock
/// node itself is removed (an empty container) and created again, where
/// the sequence suffix starts over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_grow_across_a_recreated_lock_node() {
    let zk = ZookeeperEnsemble::start_single();
    let store = Store::open(&zk.url()).await.unwrap();
    let first = store.try_acquire("reborn", &opts(5_000)).await.unwrap();
    let fence = first.fence();
    first.release().await.unwrap();
    let znodes = || {
        zk.four_letter(0, "mntr")
            .lines()
            .find_map(|l| l.strip_prefix("zk_znode_count"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .expect("zk_znode_count")
    };
    let with_node = znodes();
    // The testkit checks containers every second.
    let until = Instant::now() + Duration::from_secs(10);
    while znodes() >= with_node {
        assert!(
            Instant::now() < until,
            "the empty lock node was never removed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = store.try_acquire("reborn", &opts(5_000)).await.unwrap();
    assert!(again.fence() > fence, "{} <= {fence}", again.fence());
    again.release().await.unwrap();
}

#[tokio::test]
async fn unreachable_ensemble_is_a_clear_error() {
    let port = lockward_testkit::free_port();
    let began = Instant::now();
    let err = Store::open(&format!("zk://127.0.0.1:{port}"))
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
