//! What lockward's metrics cost: acquire+release cycles on the in-process
//! store (the cheapest, so the largest share) and on SQLite, without a
//! recorder and with the Prometheus recorder the CLI installs, in
//! alternating rounds of one run; prints each ratio.
//!
//! `cargo bench -p lockward-cli --bench metrics_cost`
//! (`LOCKWARD_BENCH_CYCLES=N` cycles a round, default 20,000).

use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Store};
use metrics_exporter_prometheus::PrometheusBuilder;

const ROUNDS: usize = 6;

fn main() {
    let cycles: u32 = std::env::var("LOCKWARD_BENCH_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(20_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let recorder = PrometheusBuilder::new().build_recorder();
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = format!("sqlite://{}", dir.path().join("l.db").display());
    println!("| store | cycles/s without a recorder | with Prometheus's | ratio |");
    println!("| --- | ---: | ---: | ---: |");
    for (label, url, n) in [
        ("memory", "memory://".to_string(), cycles),
        ("sqlite", sqlite, cycles / 10),
    ] {
        let store = runtime.block_on(Store::open(&url)).expect("store");
        let run = || runtime.block_on(cycle(&store, n));
        // Warm up, then alternate so that drift hits both alike.
        run();
        let (mut bare, mut counted) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..ROUNDS {
            bare += run();
            counted += metrics::with_local_recorder(&recorder, run);
        }
        let rate = |total: Duration| f64::from(n) * ROUNDS as f64 / total.as_secs_f64();
        let (without, with) = (rate(bare), rate(counted));
        println!(
            "| {label} | {without:.0} | {with:.0} | {:.3} |",
            with / without
        );
    }
    // The recorder saw every cycle it was installed for.
    let scraped = recorder.handle().render();
    assert!(
        scraped.contains("lockward_acquisitions_total"),
        "the recorder saw nothing:\n{scraped}"
    );
}

/// `n` try_acquire + release cycles on one name; how long they took.
async fn cycle(store: &Store, n: u32) -> Duration {
    let opts = LockOptions::new().renewal(Renewal::Off);
    let began = Instant::now();
    for _ in 0..n {
        let guard = store
            .try_acquire("bench-metrics", &opts)
            .await
            .expect("free");
        guard.release().await.expect("release");
    }
    began.elapsed()
}
