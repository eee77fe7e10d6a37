//! Uncontended cycles of two handles on one server, taken in turn, so both
//! are sampled under the same load: what an option costs (`replicas=N`
//! against the same URL without it).

use std::time::{Duration, Instant};

use lockward::{Result, Store};

use crate::{options, Latencies, MEASURE_TTL};

/// Acquire+release cycles on `name` for `run_for`, one on `a`, then one on
/// `b`, and so on: each one's latencies.
pub async fn paired_cycles(
    a: &Store,
    b: &Store,
    name: &str,
    run_for: Duration,
) -> Result<(Latencies, Latencies)> {
    let opts = options(a, MEASURE_TTL);
    let until = Instant::now() + run_for;
    let (mut on_a, mut on_b) = (Latencies::new(), Latencies::new());
    while Instant::now() < until {
        for (store, latencies) in [(a, &mut on_a), (b, &mut on_b)] {
            let began = Instant::now();
            store.try_acquire(name, &opts).await?.release().await?;
            latencies.record(began.elapsed());
        }
    }
    Ok((on_a, on_b))
}
