//! Embedded stores: figures printed, not asserted (the machines are noisy).
//!
//! `cargo bench -p lockward --bench embedded`
//!
//! - memory: uncontended acquire+release time per cycle, without and with
//!   background renewal (which spawns a task per guard);
//! - sqlite: uncontended cycles/s in one process, and total cycles/s of 4
//!   processes contending for one name.

use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Store};

mod common;

const WORKER_ENV: &str = "LOCKWARD_BENCH_SQLITE_WORKER";

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Ok(spec) = std::env::var(WORKER_ENV) {
        let (url, secs) = spec.rsplit_once('|').unwrap();
        let n = rt.block_on(contending_cycles(
            url,
            Duration::from_secs_f64(secs.parse().unwrap()),
        ));
        println!("{n}");
        return;
    }
    rt.block_on(async {
        memory().await;
        sqlite().await;
    });
}

async fn memory() {
    let store = Store::memory();
    for (label, renewal) in [
        ("renewal off", Renewal::Off),
        ("renewal on ", Renewal::Auto),
    ] {
        let opts = LockOptions::new().renewal(renewal);
        // Warm up the slot and the allocator, then measure.
        common::cycles_per_s(&store, &opts, Duration::from_millis(200)).await;
        let rate = common::cycles_per_s(&store, &opts, Duration::from_secs(2)).await;
        let per = Duration::from_secs_f64(1.0 / rate);
        println!("memory  {label}: {per:?} per uncontended acquire+release (target < 2 µs)");
    }
}

/// Cycles one contending process completes in `run_for`: it waits for the
/// lock (`acquire`), unlike the uncontended figures.
async fn contending_cycles(url: &str, run_for: Duration) -> u64 {
    let store = Store::open(url).await.unwrap();
    let opts = LockOptions::new().renewal(Renewal::Off);
    let until = Instant::now() + run_for;
    let mut n = 0;
    while Instant::now() < until {
        let guard = store.acquire("bench", &opts).await.unwrap();
        guard.release().await.unwrap();
        n += 1;
    }
    n
}

async fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let run_for = Duration::from_secs(3);
    let store = Store::open(&url).await.unwrap();
    let opts = LockOptions::new().renewal(Renewal::Off);
    let rate = common::cycles_per_s(&store, &opts, run_for).await;
    println!("sqlite  1 process : {rate:.0} uncontended cycles/s (target > 5,000)");
    let me = std::env::current_exe().unwrap();
    let spec = format!("{url}|{}", run_for.as_secs_f64());
    let workers: Vec<_> = (0..4)
        .map(|_| {
            std::process::Command::new(&me)
                .env(WORKER_ENV, &spec)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let counts: Vec<u64> = workers
        .into_iter()
        .map(|w| {
            let out = w.wait_with_output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        })
        .collect();
    let total: u64 = counts.iter().sum();
    println!(
        "sqlite  4 processes, one name: {:.0} cycles/s in all, per process {:?}",
        total as f64 / run_for.as_secs_f64(),
        counts
    );
}
