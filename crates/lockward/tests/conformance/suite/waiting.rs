//! Waiting: prompt wake-ups, every waiter served, FIFO order where it is
//! claimed, and the local line of one store handle.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockward::Store;

use super::{short, unique, Fixture};

/// A waiter wakes soon after the release: within 25 ms where the store
/// pushes wake-ups (a lost push shows as its 2 s safety-net re-check, a
/// fallback to 50 ms polling as a median near 25 ms), within the polling
/// bound where it does not. How fast a handoff is on a quiet machine is the
/// benchmark's job (`lockward bench`): on 2 cores shared with a 3-node
/// ensemble and the rest of the suite, a pushed median was seen at 11.6 ms.
pub async fn waiter_wakes_promptly(f: &dyn Fixture) {
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
        store.address(),
        handoffs.last().unwrap()
    );
    let bound = if pushed {
        Duration::from_millis(25)
    } else {
        Duration::from_millis(75)
    };
    assert!(median < bound, "median handoff {median:?} over {bound:?}");
}

/// Six waiters on their own handles: every one gets the lock in the end.
pub async fn every_waiter_gets_the_lock(f: &dyn Fixture) {
    let store = f.store().await;
    let mut waiters = Vec::new();
    for _ in 0..6 {
        waiters.push(f.store().await);
    }
    let mut order = acquisition_order(&store, waiters, Duration::from_millis(100)).await;
    order.sort();
    assert_eq!(order, vec![0, 1, 2, 3, 4, 5]);
}

/// Where the backend claims FIFO, waiters on their own handles acquire in
/// the order they came.
pub async fn waiters_in_fifo_order(f: &dyn Fixture) {
    let store = f.store().await;
    let mut waiters = Vec::new();
    for _ in 0..6 {
        waiters.push(f.store().await);
    }
    // FIFO is the order in which waiters reach the store; the spacing must
    // exceed a waiter's registration (a new connection, with SCRAM, for
    // PostgreSQL's advisory queue) on a loaded machine.
    let order = acquisition_order(&store, waiters, Duration::from_millis(100)).await;
    assert_eq!(order, vec![0, 1, 2, 3, 4, 5], "not FIFO");
}

/// Where the backend claims FIFO across processes, waiters in separate
/// processes (this test binary, started again as a waiter) acquire in the
/// order they came.
pub async fn waiters_in_fifo_order_across_processes(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("processes");
    let held = store.try_acquire(&name, &short(20_000)).await.unwrap();
    let log = std::env::temp_dir().join(format!("lockward-fifo-{name}"));
    let _ = std::fs::remove_file(&log);
    let mut children = Vec::new();
    for i in 0..5 {
        children.push(
            std::process::Command::new(std::env::current_exe().unwrap())
                .env(
                    WAITER_ENV,
                    format!("{}\n{name}\n{i}\n{}", f.url(), log.display()),
                )
                .spawn()
                .expect("start a waiter process"),
        );
        // Enough for a process to start, connect and join the line on a
        // loaded machine.
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    held.release().await.unwrap();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "a waiter process failed: {status}");
    }
    let order = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert_eq!(order, "0\n1\n2\n3\n4\n", "not FIFO across processes");
}

/// Set in a waiter process started by
/// [`waiters_in_fifo_order_across_processes`]: the URL, name, index and
/// log file, one per line.
pub const WAITER_ENV: &str = "LOCKWARD_SUITE_WAITER";

/// A waiter process's work: waits for the lock, appends its index to the
/// log while holding it, releases.
pub fn run_waiter(spec: &str) {
    let parts: Vec<&str> = spec.lines().collect();
    let [url, name, index, log] = parts[..] else {
        panic!("bad {WAITER_ENV}: {spec:?}");
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = Store::open(url).await.expect("open the store");
        let opts = short(20_000).wait(Duration::from_secs(30));
        let guard = store.acquire(name, &opts).await.expect("acquire");
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        writeln!(file, "{index}").unwrap();
        guard.release().await.unwrap();
    });
}

/// Waiters on one store handle queue locally and acquire in the order they
/// came, on every backend (the store's waiting line).
pub async fn local_waiters_in_order(f: &dyn Fixture) {
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
