//! Measurements of a lockward store, for `lockward bench` and the
//! side-by-side benchmarks: uncontended cycle
//! latency, throughput with many clients, handoff latency, fairness, and
//! the store's floor (one round trip of its cheapest write) measured in the
//! same run, so each figure is also a ratio to what the store itself costs.

#![warn(missing_docs)]

mod floor;
mod keyspace;
mod latencies;
mod memory;
mod paired;
mod rw_lock;
mod scale;
mod semaphore;

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Result, Store};

pub use floor::{floor, FloorProbe};
pub use keyspace::{keyspace, PointCost};
pub use latencies::{Latencies, CURVE_QUANTILES};
pub use memory::{bare_lock_bytes, server_memory, ServerMemory};
pub use paired::paired_cycles;
pub use rw_lock::{rw_costs, rw_sharing, RwCosts};
pub use scale::{scale, Scale};
pub use semaphore::{semaphore, semaphore_crowd, Crowd};

/// The options every measurement on `store` uses: no renewal, and a lease
/// of `ttl` or the longest the store allows.
pub fn options(store: &Store, ttl: Duration) -> LockOptions {
    let ttl = store.max_ttl().map_or(ttl, |max| ttl.min(max));
    LockOptions::new().ttl(ttl).renewal(Renewal::Off)
}

/// The lease of the short measurements.
const MEASURE_TTL: Duration = Duration::from_secs(10);

/// Uncontended acquire+release cycles on one name for `run_for`: each
/// cycle's latency.
pub async fn cycles(store: &Store, name: &str, run_for: Duration) -> Result<Latencies> {
    Ok(cycles_beside_floor(store, None, name, run_for).await?.0)
}

/// Uncontended cycles as [`cycles`] does, each one next to a floor round
/// trip of `probe`, so both are sampled under the same load: the cycles'
/// latencies, and the floor's (empty without a probe, or when a floor
/// round trip failed).
pub async fn cycles_beside_floor(
    store: &Store,
    mut probe: Option<FloorProbe>,
    name: &str,
    run_for: Duration,
) -> Result<(Latencies, Latencies)> {
    let opts = options(store, MEASURE_TTL);
    let until = Instant::now() + run_for;
    let (mut cycles, mut floor) = (Latencies::new(), Latencies::new());
    while Instant::now() < until {
        if let Some(p) = &mut probe {
            match p.round_trip().await {
                Some(took) => floor.record(took),
                None => probe = None,
            }
        }
        let began = Instant::now();
        store.try_acquire(name, &opts).await?.release().await?;
        cycles.record(began.elapsed());
    }
    Ok((cycles, floor))
}

/// What `clients` concurrent clients achieved in `run_for`.
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    /// Concurrent clients.
    pub clients: usize,
    /// All on one name (`true`) or each on its own.
    pub same_name: bool,
    /// Cycles per second, all clients together.
    pub cycles_per_s: f64,
    /// Acquisitions of the client that got the fewest, and the most.
    pub fewest: u64,
    /// See `fewest`.
    pub most: u64,
    /// The longest any client waited for the lock.
    pub longest_wait: Duration,
}

/// `clients` tasks, each with its own handle on `open()`'s store, take
/// the lock once to warm up, then cycle on one name or distinct names for
/// `run_for`.
pub async fn throughput<F, Fut>(
    open: F,
    prefix: &str,
    clients: usize,
    same_name: bool,
    run_for: Duration,
) -> Result<Throughput>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Store>>,
{
    // Every client connects before the clock starts: opening hundreds of
    // connections takes seconds on some stores, and the last ones would
    // otherwise get no time at all.
    let mut stores = Vec::with_capacity(clients);
    for _ in 0..clients {
        stores.push(open().await?);
    }
    // And each takes the lock once before it too, so that what a store
    // opens at a client's first wait (a session to wait on) is open: the
    // figures are the steady state, not hundreds of connection set-ups.
    let start = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::new();
    for (i, store) in stores.into_iter().enumerate() {
        let name = if same_name {
            format!("{prefix}/same")
        } else {
            format!("{prefix}/{i}")
        };
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            let opts = options(&store, MEASURE_TTL).wait(Duration::from_secs(30));
            let warmed = match store.acquire(&name, &opts).await {
                Ok(guard) => guard.release().await,
                Err(e) => Err(e),
            };
            start.wait().await;
            warmed?;
            let until = Instant::now() + run_for;
            let (mut n, mut longest) = (0u64, Duration::ZERO);
            while Instant::now() < until {
                let began = Instant::now();
                let guard = store.acquire(&name, &opts).await?;
                longest = longest.max(began.elapsed());
                guard.release().await?;
                n += 1;
            }
            Ok::<_, lockward::Error>((n, longest))
        }));
    }
    start.wait().await;
    let began = Instant::now();
    let mut counts = Vec::new();
    let mut longest_wait = Duration::ZERO;
    for t in tasks {
        let (n, longest) = t.await.map_err(joined)??;
        counts.push(n);
        longest_wait = longest_wait.max(longest);
    }
    let elapsed = began.elapsed().max(run_for);
    Ok(Throughput {
        clients,
        same_name,
        cycles_per_s: counts.iter().sum::<u64>() as f64 / elapsed.as_secs_f64(),
        fewest: counts.iter().copied().min().unwrap_or(0),
        most: counts.iter().copied().max().unwrap_or(0),
        longest_wait,
    })
}

/// Handoff latencies: a holder releases at a random moment while a
/// waiter (on its own handle) waits; each sample runs from the start of the
/// release to the waiter's successful acquire.
pub async fn handoffs(
    holder: &Store,
    waiter: &Store,
    name: &str,
    samples: usize,
) -> Result<Latencies> {
    let opts = options(holder, MEASURE_TTL).wait(Duration::from_secs(30));
    let mut out = Latencies::new();
    for _ in 0..samples {
        let held = holder.try_acquire(name, &opts).await?;
        let (w, n, o) = (waiter.clone(), name.to_string(), opts.clone());
        let waiting = tokio::spawn(async move {
            let g = w.acquire(&n, &o).await?;
            let at = Instant::now();
            g.release().await?;
            Ok::<_, lockward::Error>(at)
        });
        tokio::time::sleep(
            Duration::from_millis(2) + Duration::from_micros(fastrand::u64(0..8_000)),
        )
        .await;
        let released = Instant::now();
        held.release().await?;
        let got = waiting.await.map_err(joined)??;
        out.record(got.saturating_duration_since(released));
    }
    Ok(out)
}

/// A measuring task that panicked or was cancelled, as an error.
fn joined(e: tokio::task::JoinError) -> lockward::Error {
    lockward::Error::Protocol {
        address: "bench".into(),
        message: e.to_string(),
        cause: None,
    }
}

/// Cycles per second of `tasks` together, each returning how many cycles
/// it made while the clock ran for (at least) `run_for`.
async fn cycles_per_s(
    tasks: Vec<tokio::task::JoinHandle<Result<u64>>>,
    run_for: Duration,
) -> Result<f64> {
    let began = Instant::now();
    let mut total = 0;
    for t in tasks {
        total += t.await.map_err(joined)??;
    }
    Ok(total as f64 / began.elapsed().max(run_for).as_secs_f64())
}
