//! A semaphore of many permits under load: acquire+release cycles of one
//! permit each, by `clients` store handles at once.

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
        sems.push(Semaphore::new(open().await?, name, permits)?);
    }
    let until = Instant::now() + run_for;
    for sem in sems {
        tasks.push(tokio::spawn(async move {
            let opts = lockward::LockOptions::new()
                .ttl(Duration::from_secs(10))
                .renewal(lockward::Renewal::Off)
                .wait(Duration::from_secs(30));
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
