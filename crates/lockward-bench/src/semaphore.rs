//! A semaphore of many permits under load: acquire+release cycles of one
//! permit each, by `clients` store handles at once, and beside a crowd of
//! holders.

use std::time::{Duration, Instant};

use lockward::recipe::Semaphore;
use lockward::{Result, Store};

/// Cycles per second of all clients together.
pub async fn semaphore<F, Fut>(
    open: F,
    name: &str,
    permits: u32,
    clients: usize,
    run_for: Duration,
) -> Result<f64>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Store>>,
{
    let mut tasks = Vec::new();
    let mut sems = Vec::new();
    for _ in 0..clients {
        let store = open().await?;
        // The store's longest TTL where it bounds it (a ZooKeeper session).
        let opts = super::options(&store, Duration::from_secs(10)).wait(Duration::from_secs(30));
        sems.push((Semaphore::new(store, name, permits)?, opts));
    }
    let until = Instant::now() + run_for;
    for (sem, opts) in sems {
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                sem.acquire(&opts).await?.release().await?;
                n += 1;
            }
            Ok::<_, lockward::Error>(n)
        }));
    }
    super::cycles_per_s(tasks, run_for).await
}

/// Acquire+release cycles timed on an empty semaphore and again beside
/// `holders` holders of one permit each.
pub struct Crowd {
    /// The median cycle with no other holder.
    pub empty: Duration,
    /// The median cycle with `holders` holding.
    pub crowded: Duration,
    /// The server's growth per holder, and what was measured, where the
    /// server says (Redis: `used_memory`).
    pub bytes_per_holder: Option<(f64, &'static str)>,
}

/// Cycles timed on an empty semaphore of `permits`, then with `holders`
/// holders of one permit each taken (by 16 tasks), then released.
pub async fn semaphore_crowd(
    url: &lockward::StoreUrl,
    store: &Store,
    name: &str,
    permits: u32,
    holders: usize,
    samples: usize,
) -> Result<Crowd> {
    let sem = Semaphore::new(store.clone(), name, permits)?;
    let opts = super::options(store, Duration::from_secs(600));
    let empty = median_cycle(&sem, &opts, samples).await?;
    let before = super::server_memory(url).await;
    let mut tasks = Vec::new();
    for part in 0..16 {
        let (sem, opts) = (sem.clone(), opts.clone());
        let count = holders / 16 + usize::from(part < holders % 16);
        tasks.push(tokio::spawn(async move {
            let mut held = Vec::with_capacity(count);
            for _ in 0..count {
                held.push(sem.try_acquire(&opts).await?);
            }
            Ok::<_, lockward::Error>(held)
        }));
    }
    let mut parts = Vec::new();
    let mut failed = None;
    for task in tasks {
        match joined(task).await {
            Ok(part) => parts.push(part),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    let after = super::server_memory(url).await;
    let taken: usize = parts.iter().map(Vec::len).sum();
    let bytes_per_holder = match (before, after) {
        (Some(b), Some(a)) if taken > 0 => Some((
            a.bytes.saturating_sub(b.bytes) as f64 / taken as f64,
            a.what,
        )),
        _ => None,
    };
    let crowded = match failed {
        None => median_cycle(&sem, &opts, samples).await,
        Some(e) => Err(e),
    };
    let releases: Vec<_> = parts
        .into_iter()
        .map(|part| {
            tokio::spawn(async move {
                for permit in part {
                    let _ = permit.release().await;
                }
            })
        })
        .collect();
    for task in releases {
        joined(task).await;
    }
    Ok(Crowd {
        empty,
        crowded: crowded?,
        bytes_per_holder,
    })
}

async fn median_cycle(
    sem: &Semaphore,
    opts: &lockward::LockOptions,
    samples: usize,
) -> Result<Duration> {
    let mut took = Vec::with_capacity(samples);
    for _ in 0..samples.max(1) {
        let started = Instant::now();
        sem.try_acquire(opts).await?.release().await?;
        took.push(started.elapsed());
    }
    took.sort_unstable();
    Ok(took[took.len() / 2])
}

/// A task's output; its panic goes on in the caller.
async fn joined<T>(task: tokio::task::JoinHandle<T>) -> T {
    task.await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}
