//! Waiting: prompt wake-ups, every waiter served, FIFO order where it is
//! claimed, and the local line of one store handle.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockward::Store;

use super::{short, unique, Fixture};

/// A waiter wakes soon after the release: well within the 2 s safety-net
/// re-check where the store pushes wake-ups (a lost push would show as a
/// median near it), and within ten polls where it polls (a waiter that
/// missed the release would wait for the 10 s lease). How fast a handoff is
/// belongs to the benchmark (`lockward bench`, docs/benchmarks.md): on a
/// quiet machine a pushed handoff takes a few milliseconds, on 2 busy cores
/// shared with the rest of the suite tens of them.
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
    // Pushed or polled, a prompt wake-up is far below both the safety net
    // (2 s) and the lease (10 s), on a loaded machine too.
    let bound = Duration::from_millis(500);
    assert!(
        median < bound,
        "median handoff {median:?} over {bound:?} (wake-ups pushed: {pushed})"
    );
}

/// Six waiters on their own handles: every one gets the lock in the end.
pub async fn every_waiter_gets_the_lock(f: &dyn Fixture) {
    let store = f.store().await;
    let mut waiters = Vec::new();
    for _ in 0..6 {
        waiters.push(f.store().await);
    }
    let mut order = acquisition_order(&store, waiters, Some(f)).await;
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
    // FIFO is the order in which waiters reach the store: each one starts
    // once the store saw the one before it in its line.
    let order = acquisition_order(&store, waiters, Some(f)).await;
    assert_eq!(order, vec![0, 1, 2, 3, 4, 5], "not FIFO");
}

/// Where the backend claims FIFO across processes, waiters in separate
/// processes (this test binary, started again as a waiter) acquire in the
/// order they came.
pub async fn waiters_in_fifo_order_across_processes(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique("processes");
    let held = store.try_acquire(&name, &short(30_000)).await.unwrap();
    let log = std::env::temp_dir().join(format!("lockward-fifo-{name}"));
    let _ = std::fs::remove_file(&log);
    let mut children = Vec::new();
    let before = f.waiting(&store, &name).await;
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
        // The next starts once this one is in the store's line.
        in_line(f, &store, &name, before, i + 1, Duration::from_millis(400)).await;
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
    // The store's line shows the first of them only: the others wait in
    // this process's line, spaced out in time.
    let order = acquisition_order(&store, waiters, None).await;
    assert_eq!(order, vec![0, 1, 2, 3, 4]);
}

/// Holds a fresh lock on `holder`, starts one waiter per store in
/// `waiters`, releases, and returns the order in which the waiters
/// acquired. With `seen`, each waiter starts once the store shows the one
/// before it in its line (see [`Fixture::waiting`]); without, 20 ms apart.
async fn acquisition_order(
    holder: &Store,
    waiters: Vec<Store>,
    seen: Option<&dyn Fixture>,
) -> Vec<usize> {
    let name = unique("order");
    let held = holder.try_acquire(&name, &short(30_000)).await.unwrap();
    let before = match seen {
        Some(f) => f.waiting(holder, &name).await,
        None => None,
    };
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, s) in waiters.into_iter().enumerate() {
        let (theirs, order) = (name.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let g = s.acquire(&theirs, &short(10_000)).await.unwrap();
            order.lock().unwrap().push(i);
            g.release().await.unwrap();
        }));
        match seen {
            Some(f) => in_line(f, holder, &name, before, i + 1, Duration::from_millis(100)).await,
            None => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    held.release().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .expect("waiter starved")
            .unwrap();
    }
    let order = order.lock().unwrap().clone();
    order
}

/// Returns once the store shows `joined` more waiters on `name` than
/// `before` (see [`Fixture::waiting`]); where it shows none, after
/// `otherwise`.
async fn in_line(
    f: &dyn Fixture,
    store: &Store,
    name: &str,
    before: Option<usize>,
    joined: usize,
    otherwise: Duration,
) {
    let Some(before) = before else {
        return tokio::time::sleep(otherwise).await;
    };
    let began = Instant::now();
    loop {
        let now = f.waiting(store, name).await.unwrap_or(0);
        if now >= before + joined {
            return;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "waiter {joined} never showed in the store's line of {name} ({now} there, {before} before)"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
