//! Measurements shared by the benchmarks.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use lockward::{LockOptions, Store};

/// The `p`-th percentile (0.0–1.0) of `samples`.
pub fn percentile(mut samples: Vec<Duration>, p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p) as usize]
}

/// Handoff latencies: a holder releases at a random moment (after `pause`
/// plus up to 10 ms) while a waiter waits; each sample runs from the start
/// of the release to the waiter's successful acquire.
pub async fn handoffs(
    store: &Store,
    opts: &LockOptions,
    samples: usize,
    pause: Duration,
) -> Vec<Duration> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let holder = store.try_acquire("bench/handoff", opts).await.unwrap();
        let (s, o) = (store.clone(), opts.clone());
        let waiter = tokio::spawn(async move {
            let g = s.acquire("bench/handoff", &o).await.unwrap();
            let at = Instant::now();
            g.release().await.unwrap();
            at
        });
        tokio::time::sleep(pause + Duration::from_micros(fastrand::u64(0..10_000))).await;
        let released = Instant::now();
        holder.release().await.unwrap();
        out.push(waiter.await.unwrap().saturating_duration_since(released));
    }
    out
}

/// Uncontended acquire+release cycles per second on one name, for `run_for`.
pub async fn cycles_per_s(store: &Store, opts: &LockOptions, run_for: Duration) -> f64 {
    let until = Instant::now() + run_for;
    let mut n = 0u64;
    while Instant::now() < until {
        store
            .try_acquire("bench/cycle", opts)
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        n += 1;
    }
    n as f64 / run_for.as_secs_f64()
}
