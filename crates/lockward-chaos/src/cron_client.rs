//! The cron workload's clients: instances of one per-second job under the
//! default overlap policy (forbid), each execution working longer than a
//! second; every execution is recorded from start to end with its lease's
//! local deadline (see [`crate::cron_check`]).

use std::path::Path;
use std::time::Duration;

use lockward::recipe::cron::{CronJob, CronOptions, Outcome as CronOutcome, Overlap, Turn};
use lockward::Store;

use crate::history::{mono_at, mono_ns, outcome_of, Kind, Op, Outcome, Recorder};

/// How long an execution may hold its locks.
const AT_MOST: Duration = Duration::from_secs(3);

/// Runs one instance until `until` or the stop file.
pub async fn run(
    store: &Store,
    index: u32,
    dir: &Path,
    rec: &mut Recorder,
    until: u64,
) -> Result<(), String> {
    let options = CronOptions {
        lock_at_most_for: store.max_ttl().map_or(AT_MOST, |max| max.min(AT_MOST)),
        overlap: Overlap::Forbid,
        ..CronOptions::default()
    };
    let job = CronJob::new(
        store.clone(),
        "chaos-cron",
        "* * * * * *",
        "UTC",
        &format!("client-{index}"),
        options,
    )
    .map_err(|e| e.to_string())?;
    let stop = dir.join("stop");
    let holding = dir.join(format!("holding-{}", std::process::id()));
    let mut fire = job
        .next_fire_after(chrono::Utc::now())
        .map_err(|e| e.to_string())?;
    while mono_ns() < until && !stop.exists() {
        let wait = (fire - chrono::Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(wait).await;
        let start = mono_ns();
        let turn = job.take_turn(fire).await;
        fire = job
            .next_fire_after(fire.max(chrono::Utc::now()))
            .map_err(|e| e.to_string())?;
        let claim = match turn {
            Ok(Turn::Run(claim)) => claim,
            Ok(Turn::Taken | Turn::Skipped { .. }) => continue,
            Err(e) => {
                rec.record(&Op {
                    client: index,
                    kind: Kind::Acquire,
                    outcome: outcome_of(&e),
                    fence: 0,
                    start,
                    end: mono_ns(),
                    value: 0,
                    seen: 0,
                });
                continue;
            }
        };
        let deadline = mono_at(claim.lost_signal().deadline());
        let fence = claim.fence();
        rec.record(&Op {
            client: index,
            kind: Kind::Acquire,
            outcome: Outcome::Ok,
            fence,
            start,
            end: mono_ns(),
            value: deadline,
            seen: 0,
        });
        let _ = std::fs::write(&holding, "");
        // Longer than the period: without the overlap policy the next fire
        // time would start beside it.
        tokio::time::sleep(Duration::from_millis(fastrand::u64(200..1_800))).await;
        let end = mono_ns();
        let _ = std::fs::remove_file(&holding);
        let finished = claim.finish(CronOutcome::Succeeded).await;
        rec.record(&Op {
            client: index,
            kind: Kind::Release,
            outcome: if finished.is_ok() {
                Outcome::Ok
            } else {
                Outcome::Failed
            },
            fence,
            start: end,
            end: mono_ns(),
            value: 0,
            seen: 0,
        });
    }
    Ok(())
}
