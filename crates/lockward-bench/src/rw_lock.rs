//! A read-write lock against a plain lock on the same store, measured in one
//! run: what one read and one write cost uncontended, and how many read
//! cycles many handles make together (readers share) against as many
//! handles taking the plain lock (they queue).

use std::time::{Duration, Instant};

use lockward::recipe::RwLock;
use lockward::{Result, Store};

use crate::{options, Latencies, MEASURE_TTL};

/// Uncontended cycles (take and release, one handle) of each kind, in
/// alternation so that all three see the same load.
pub struct RwCosts {
    /// A plain lock.
    pub plain: Latencies,
    /// The read side.
    pub read: Latencies,
    /// The write side, nobody reading.
    pub write: Latencies,
}

/// `rounds` cycles of each kind on names under `prefix`.
pub async fn rw_costs(store: &Store, prefix: &str, rounds: usize) -> Result<RwCosts> {
    let opts = options(store, MEASURE_TTL);
    let plain_name = format!("{prefix}/plain");
    let lock = RwLock::new(store.clone(), format!("{prefix}/rw"))?;
    let mut costs = RwCosts {
        plain: Latencies::new(),
        read: Latencies::new(),
        write: Latencies::new(),
    };
    for _ in 0..rounds {
        let began = Instant::now();
        store.acquire(&plain_name, &opts).await?.release().await?;
        costs.plain.record(began.elapsed());
        let began = Instant::now();
        lock.read(&opts).await?.release().await?;
        costs.read.record(began.elapsed());
        let began = Instant::now();
        lock.write(&opts).await?.release().await?;
        costs.write.record(began.elapsed());
    }
    Ok(costs)
}

/// Cycles per second of `clients` handles on one name for `run_for`:
/// reading the read-write lock (each read held `hold`), then taking the
/// plain lock (held as long): (readers, plain).
pub async fn rw_sharing<F, Fut>(
    open: F,
    prefix: &str,
    clients: usize,
    hold: Duration,
    run_for: Duration,
) -> Result<(f64, f64)>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Store>>,
{
    let mut stores = Vec::new();
    for _ in 0..clients {
        stores.push(open().await?);
    }
    let readers = rate(&stores, prefix, hold, run_for, true).await?;
    let plain = rate(&stores, prefix, hold, run_for, false).await?;
    Ok((readers, plain))
}

async fn rate(
    stores: &[Store],
    prefix: &str,
    hold: Duration,
    run_for: Duration,
    read: bool,
) -> Result<f64> {
    let until = Instant::now() + run_for;
    let mut tasks = Vec::new();
    for store in stores {
        let store = store.clone();
        let opts = options(&store, MEASURE_TTL).wait(Duration::from_secs(60));
        let lock = RwLock::new(store.clone(), format!("{prefix}/shared"))?;
        let plain = format!("{prefix}/queued");
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                if read {
                    let r = lock.read(&opts).await?;
                    tokio::time::sleep(hold).await;
                    r.release().await?;
                } else {
                    let g = store.acquire(&plain, &opts).await?;
                    tokio::time::sleep(hold).await;
                    g.release().await?;
                }
                n += 1;
            }
            Ok::<_, lockward::Error>(n)
        }));
    }
    super::cycles_per_s(tasks, run_for).await
}
