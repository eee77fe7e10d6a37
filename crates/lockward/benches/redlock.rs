//! Redlock figures, measured in one run on the same masters:
//!
//! - uncontended acquire+release cycles/s over 5 masters, against one Redis
//!   (`redis://`, the same server as master 1), as a ratio;
//! - against the `rslock` crate on the same 5 masters, alternating runs;
//! - handoff p50 against rslock's (which retries after a random delay).
//!
//! `cargo bench -p lockward --features redis --bench redlock`

use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Store};
use lockward_testkit::{RedisMasters, RedisOptions};
use rslock::LockManager;

mod common;

const RUN_FOR: Duration = Duration::from_secs(2);
const TTL: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() {
    let masters = RedisMasters::start(5, RedisOptions::default());
    let redlock = Store::open(&masters.url()).await.unwrap();
    let first = masters
        .url()
        .trim_start_matches("redlock://")
        .split(',')
        .next()
        .unwrap()
        .to_string();
    let single = Store::open(&format!("redis://{first}")).await.unwrap();
    let uris: Vec<String> = masters
        .url()
        .trim_start_matches("redlock://")
        .split(',')
        .map(|a| format!("redis://{a}"))
        .collect();
    let rslock = LockManager::new(uris);

    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut one = Vec::new();
    for _ in 0..2 {
        ours.push(lockward_cycles(&redlock).await);
        theirs.push(rslock_cycles(&rslock).await);
        one.push(lockward_cycles(&single).await);
    }
    let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    let (ours, theirs, one) = (best(&ours), best(&theirs), best(&one));
    println!("redlock over 5 masters, one client, uncontended (best of 2 alternating runs):");
    println!("  lockward redlock://x5  {ours:>8.0} cycles/s");
    println!(
        "  lockward redis://x1    {one:>8.0} cycles/s   (5 masters / 1 = {:.2})",
        ours / one
    );
    println!("  rslock on the same 5   {theirs:>8.0} cycles/s   (lockward / rslock = {:.2}, target >= 1.5)", ours / theirs);

    let ours = lockward_contended(&redlock).await;
    let theirs = rslock_contended(&rslock).await;
    println!(
        "8 clients on one name: lockward {ours:.0} cycles/s, rslock {theirs:.0} cycles/s (lockward / rslock = {:.1})",
        ours / theirs
    );

    let ours = lockward_handoff(&redlock).await;
    let theirs = rslock_handoff(&rslock).await;
    println!(
        "handoff p50: lockward {ours:?}, rslock {theirs:?} (rslock / lockward = {:.0}x, target >= 20x)",
        theirs.as_secs_f64() / ours.as_secs_f64()
    );
}

async fn lockward_cycles(store: &Store) -> f64 {
    common::cycles_per_s(
        store,
        &LockOptions::new().ttl(TTL).renewal(Renewal::Off),
        RUN_FOR,
    )
    .await
}

async fn rslock_cycles(manager: &LockManager) -> f64 {
    let until = Instant::now() + RUN_FOR;
    let mut n = 0;
    while Instant::now() < until {
        let lock = manager.lock("bench-rslock", TTL).await.unwrap();
        manager.unlock(&lock).await;
        n += 1;
    }
    n as f64 / RUN_FOR.as_secs_f64()
}

const CONTENDERS: usize = 8;

async fn lockward_contended(store: &Store) -> f64 {
    let until = Instant::now() + RUN_FOR;
    let tasks: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let opts = LockOptions::new().ttl(TTL).renewal(Renewal::Off);
                let mut n = 0u64;
                while Instant::now() < until {
                    let wait = until.saturating_duration_since(Instant::now());
                    match store.acquire("contended", &opts.clone().wait(wait)).await {
                        Ok(g) => {
                            g.release().await.unwrap();
                            n += 1;
                        }
                        Err(_) => break,
                    }
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / RUN_FOR.as_secs_f64()
}

async fn rslock_contended(manager: &LockManager) -> f64 {
    let until = Instant::now() + RUN_FOR;
    let tasks: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let m = manager.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < until {
                    let left = until.saturating_duration_since(Instant::now());
                    match tokio::time::timeout(left, m.acquire_no_guard("contended-rslock", TTL))
                        .await
                    {
                        Ok(Ok(lock)) => {
                            m.unlock(&lock).await;
                            n += 1;
                        }
                        _ => break,
                    }
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / RUN_FOR.as_secs_f64()
}

fn random_pause() -> Duration {
    Duration::from_micros(1_000 + fastrand::u64(0..10_000))
}

async fn lockward_handoff(store: &Store) -> Duration {
    let opts = LockOptions::new().ttl(TTL).renewal(Renewal::Off);
    common::percentile(
        common::handoffs(store, &opts, 60, Duration::from_millis(1)).await,
        0.5,
    )
}

async fn rslock_handoff(manager: &LockManager) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..30 {
        let holder = manager.lock("handoff-rslock", TTL).await.unwrap();
        let m = manager.clone();
        let waiter = tokio::spawn(async move {
            let lock = m.acquire_no_guard("handoff-rslock", TTL).await.unwrap();
            let at = Instant::now();
            m.unlock(&lock).await;
            at
        });
        tokio::time::sleep(random_pause()).await;
        let released = Instant::now();
        manager.unlock(&holder).await;
        samples.push(waiter.await.unwrap().saturating_duration_since(released));
    }
    common::percentile(samples, 0.5)
}
