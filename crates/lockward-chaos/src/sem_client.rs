//! The semaphore workload's clients: more holders than permits take one
//! permit each of one semaphore, hold it a while and give it back; every
//! hold is recorded from grant to release with its lease's local deadline
//! (see [`crate::sem_check`]).

use std::path::Path;
use std::time::Duration;

use lockward::recipe::Semaphore;
use lockward::{LockOptions, Store};

use crate::history::{mono_at, mono_ns, outcome_of, Kind, Op, Outcome, Recorder};
use crate::workload::TTL;

/// The semaphore's permits (its clients are more: they wait their turn).
pub const PERMITS: u32 = 2;

/// Runs one holder until `until` or the stop file.
pub async fn run(
    store: &Store,
    index: u32,
    dir: &Path,
    rec: &mut Recorder,
    until: u64,
) -> Result<(), String> {
    let semaphore =
        Semaphore::new(store.clone(), "chaos-sem", PERMITS).map_err(|e| e.to_string())?;
    let stop = dir.join("stop");
    let holding = dir.join(format!("holding-{}", std::process::id()));
    let ttl = store.max_ttl().map_or(TTL, |max| max.min(TTL));
    let op = |kind, outcome, fence, start, value| Op {
        client: index,
        kind,
        outcome,
        fence,
        start,
        end: mono_ns(),
        value,
        seen: 0,
    };
    while mono_ns() < until && !stop.exists() {
        let start = mono_ns();
        let opts = LockOptions::new().ttl(ttl).wait(Duration::from_secs(3));
        let permit = match semaphore.acquire(&opts).await {
            Ok(permit) => permit,
            Err(e) => {
                rec.record(&op(Kind::Acquire, outcome_of(&e), 0, start, 0));
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let fence = permit.guard().fence();
        let deadline = mono_at(permit.guard().deadline());
        rec.record(&op(Kind::Acquire, Outcome::Ok, fence, start, deadline));
        let _ = std::fs::write(&holding, "");
        tokio::time::sleep(Duration::from_millis(fastrand::u64(50..400))).await;
        let _ = std::fs::remove_file(&holding);
        let start = mono_ns();
        let outcome = match permit.release().await {
            Ok(()) => Outcome::Ok,
            Err(_) => Outcome::Failed,
        };
        rec.record(&op(Kind::Release, outcome, fence, start, 0));
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..20))).await;
    }
    Ok(())
}
