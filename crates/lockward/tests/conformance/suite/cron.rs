//! Cron overlap policies: forbid skips (and writes the skip), allow runs
//! side by side, replace stops the running execution before the next.

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use lockward::recipe::cron::{CronJob, CronOptions, Outcome, Overlap, Turn};

use super::{unique, Fixture};

/// A job on a fresh store handle, as instance `instance` would run it.
async fn job(f: &dyn Fixture, name: &str, instance: &str, overlap: Overlap) -> CronJob {
    let store = f.store().await;
    let at_most = store.max_ttl().map_or(Duration::from_secs(10), |max| {
        max.min(Duration::from_secs(10))
    });
    let options = CronOptions {
        lock_at_most_for: at_most,
        overlap,
        ..CronOptions::default()
    };
    CronJob::new(store, name, "* * * * * *", "UTC", instance, options).unwrap()
}

fn fire(second: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + second, 0).unwrap()
}

/// Under forbid a fire time that comes while the job runs on another
/// instance is skipped, once, and the ledger says so; once the job ended
/// the next fire time runs. Under allow the same fire time would run.
pub async fn cron_overlap_forbid_skips_and_allow_runs(f: &dyn Fixture) {
    let name = unique("cron-forbid");
    let a = job(f, &name, "a", Overlap::Forbid).await;
    let b = job(f, &name, "b", Overlap::Forbid).await;
    let Turn::Run(running) = a.take_turn(fire(1)).await.unwrap() else {
        panic!("the first fire time did not run");
    };
    let skipped = b.take_turn(fire(2)).await.unwrap();
    assert!(
        matches!(&skipped, Turn::Skipped { running } if running == "a" || running == "another instance"),
        "{skipped:?}"
    );
    assert!(
        matches!(b.take_turn(fire(2)).await.unwrap(), Turn::Taken),
        "a skipped fire time was taken again"
    );
    let allowed = job(f, &name, "c", Overlap::Allow).await;
    let Turn::Run(side_by_side) = allowed.take_turn(fire(3)).await.unwrap() else {
        panic!("allow did not run beside the running execution");
    };
    side_by_side.finish(Outcome::Succeeded).await.unwrap();
    running.finish(Outcome::Succeeded).await.unwrap();
    let Turn::Run(next) = b.take_turn(fire(4)).await.unwrap() else {
        panic!("the next fire time did not run once the job ended");
    };
    next.finish(Outcome::Succeeded).await.unwrap();

    let ledger = a.ledger(fire(1), fire(5)).await.unwrap();
    let outcomes: Vec<Option<Outcome>> = ledger
        .iter()
        .map(|e| e.execution.as_ref().map(|x| x.outcome.clone()))
        .collect();
    assert_eq!(outcomes[0], Some(Outcome::Succeeded), "{ledger:?}");
    assert!(
        matches!(&outcomes[1], Some(Outcome::Skipped(why)) if why.starts_with("still running on")),
        "{ledger:?}"
    );
    assert_eq!(ledger[1].execution.as_ref().unwrap().instance, "b");
    assert_eq!(outcomes[2], Some(Outcome::Succeeded), "{ledger:?}");
    assert_eq!(outcomes[3], Some(Outcome::Succeeded), "{ledger:?}");
}

/// Under replace the new fire time asks the running execution to stop and
/// starts only after it ended; the request does not stop the new one.
pub async fn cron_overlap_replace_stops_the_running_one(f: &dyn Fixture) {
    let name = unique("cron-replace");
    let a = job(f, &name, "a", Overlap::Replace).await;
    let b = job(f, &name, "b", Overlap::Replace).await;
    let Turn::Run(old) = a.take_turn(fire(1)).await.unwrap() else {
        panic!("the first fire time did not run");
    };
    let next = tokio::spawn(async move {
        let turn = b.take_turn(fire(2)).await;
        (turn, Instant::now())
    });
    tokio::time::timeout(Duration::from_secs(5), old.replaced())
        .await
        .expect("the running execution was not asked to stop");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !next.is_finished(),
        "the new one started before the old ended"
    );
    let ending = Instant::now();
    old.finish(Outcome::Failed("replaced".into()))
        .await
        .unwrap();
    let (turn, started) = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the new one never started")
        .unwrap();
    let Turn::Run(new) = turn.unwrap() else {
        panic!("the replacing fire time did not run");
    };
    assert!(
        started >= ending,
        "the new one started before the old ended"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(800), new.replaced())
            .await
            .is_err(),
        "the stop request stopped the new execution too"
    );
    new.finish(Outcome::Succeeded).await.unwrap();
}

/// A fire time nobody took before a later one was due is recorded missed
/// once, however many instances notice; one that ran is not.
pub async fn cron_missed_fire_time_is_recorded_once(f: &dyn Fixture) {
    let name = unique("cron-missed");
    let a = job(f, &name, "a", Overlap::Forbid).await;
    let b = job(f, &name, "b", Overlap::Forbid).await;
    let (first, second) = tokio::join!(
        a.record_missed(fire(1), "late on a"),
        b.record_missed(fire(1), "late on b")
    );
    assert!(
        first.unwrap() ^ second.unwrap(),
        "recorded by both or by neither"
    );
    assert!(!a.record_missed(fire(1), "again").await.unwrap());

    let Turn::Run(ran) = a.take_turn(fire(2)).await.unwrap() else {
        panic!("fire time 2 did not run");
    };
    assert!(!b.record_missed(fire(2), "while it runs").await.unwrap());
    ran.finish(Outcome::Succeeded).await.unwrap();
    assert!(!b.record_missed(fire(2), "after it ran").await.unwrap());

    let ledger = a.ledger(fire(1), fire(3)).await.unwrap();
    let outcomes: Vec<_> = ledger
        .iter()
        .map(|e| e.execution.as_ref().map(|x| x.outcome.clone()))
        .collect();
    assert!(
        matches!(&outcomes[0], Some(Outcome::Missed(why)) if why.starts_with("late on")),
        "{ledger:?}"
    );
    assert_eq!(outcomes[1], Some(Outcome::Succeeded), "{ledger:?}");
}
