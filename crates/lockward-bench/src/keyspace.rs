//! Point operations against the size of the store: idempotency, run-once
//! and rate-limit checks timed on the store as it is, then again after
//! `N` unrelated records were added, so their ratio shows whether any of
//! them scans.

use std::time::{Duration, Instant};

use lockward::recipe::{FixedWindow, Idempotency};
use lockward::{Result, Store};

/// The pause between the fill and the second timing.
const SETTLE: Duration = Duration::from_secs(5);

/// One operation's median time, before and after the keys were added.
#[derive(Debug, Clone, PartialEq)]
pub struct PointCost {
    /// What was timed.
    pub operation: &'static str,
    /// Median on the store without the unrelated keys.
    pub empty: Duration,
    /// Median with them.
    pub full: Duration,
}

impl PointCost {
    /// `full / empty`: 1.0 when the keys cost nothing.
    pub fn ratio(&self) -> f64 {
        self.full.as_secs_f64() / self.empty.as_secs_f64().max(1e-9)
    }
}

/// Times the three point operations `samples` times each, adds `n`
/// unrelated records (64 writers at once), and times them again.
pub async fn keyspace(
    store: &Store,
    prefix: &str,
    n: usize,
    samples: usize,
) -> Result<Vec<PointCost>> {
    let empty = point_costs(store, &format!("{prefix}/before"), samples).await?;
    fill(store, &format!("{prefix}/unrelated"), n).await?;
    // Let the server finish with the fill (a SQL store's autovacuum and
    // checkpoint), so that its work is not timed with the reads.
    tokio::time::sleep(SETTLE).await;
    let full = point_costs(store, &format!("{prefix}/after"), samples).await?;
    Ok(empty
        .into_iter()
        .zip(full)
        .map(|((operation, empty), (_, full))| PointCost {
            operation,
            empty,
            full,
        })
        .collect())
}

async fn point_costs(
    store: &Store,
    prefix: &str,
    samples: usize,
) -> Result<Vec<(&'static str, Duration)>> {
    let keys = Idempotency::new(store.clone()).namespace(format!("{prefix}/idem"));
    let once = Idempotency::new(store.clone()).namespace(format!("{prefix}/once"));
    let limit = FixedWindow::new(
        store.clone(),
        format!("{prefix}/limit"),
        1_000_000_000,
        Duration::from_secs(60),
    )?;
    let (mut run, mut ran, mut checked) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..samples {
        // A new key each time: a claim, the operation's record, a release.
        let began = Instant::now();
        keys.run(&format!("order-{i}"), || async {
            Ok::<_, std::io::Error>("ok".into())
        })
        .await
        .map_err(into_error)?;
        run.push(began.elapsed());
        // A duplicate of a run-once key: one exact read finds it.
        let began = Instant::now();
        once.run("migration", || async {
            Ok::<_, std::io::Error>("done".into())
        })
        .await
        .map_err(into_error)?;
        ran.push(began.elapsed());
        let began = Instant::now();
        limit.check("client-1").await?;
        checked.push(began.elapsed());
    }
    Ok(vec![
        ("idempotency run", median(run)),
        ("run-once (already ran)", median(ran)),
        ("rate-limit check", median(checked)),
    ])
}

/// Adds `n` records under `prefix`, 64 writers at once.
async fn fill(store: &Store, prefix: &str, n: usize) -> Result<()> {
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..64 {
        let (store, prefix) = (store.clone(), prefix.to_string());
        writers.spawn(async move {
            for i in (w..n).step_by(64) {
                store
                    .put_record(
                        &format!("{prefix}/{i}"),
                        "cached value",
                        Duration::from_secs(3600),
                    )
                    .await?;
            }
            Ok::<_, lockward::Error>(())
        });
    }
    while let Some(done) = writers.join_next().await {
        done.map_err(super::joined)??;
    }
    Ok(())
}

fn into_error(e: lockward::recipe::IdempotencyError<std::io::Error>) -> lockward::Error {
    match e {
        lockward::recipe::IdempotencyError::Store(e) => e,
        other => lockward::Error::Protocol {
            address: "bench".into(),
            message: other.to_string(),
            cause: None,
        },
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}
