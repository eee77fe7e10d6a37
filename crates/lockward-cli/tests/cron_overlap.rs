//! `lockward cron --overlap`: 3 instances, a fire time every second and a
//! 2.5 s job. With `forbid` (the default) no two executions overlap and the
//! skipped fire times are in the ledger; with `allow` they overlap; with
//! `replace` each execution ends before the one that replaces it starts.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{lockward, KillOnDrop};

/// Writes `start NS` and `end NS` lines (one pair per execution, the end
/// also when it is stopped) to `DIR/runs`. Bash's own clock, expanded in
/// place, not `date`: a process the trap starts while the tree is being
/// stopped is stopped too, and its time would be lost.
const JOB: &str = r#"echo "$LOCKWARD_FIRE_TIME start ${EPOCHREALTIME/./}000" >> "$1/runs"; trap 'echo "$LOCKWARD_FIRE_TIME end ${EPOCHREALTIME/./}000" >> "$1/runs"; exit 0' TERM; sleep 2.5 & wait; echo "$LOCKWARD_FIRE_TIME end ${EPOCHREALTIME/./}000" >> "$1/runs""#;

/// Runs 3 instances with `overlap` for 7 s; each execution's (start, end)
/// in ns, by start, and the ledger's rows.
fn three_instances(
    store: &str,
    dir: &Path,
    overlap: &str,
) -> (Vec<(u128, u128)>, Vec<serde_json::Value>) {
    let job = format!("overlap-{overlap}");
    let mut instances: Vec<KillOnDrop> = (0..3)
        .map(|_| {
            KillOnDrop(
                Command::new(lockward())
                    .args(["--store", store, "cron", &job, "* * * * * *"])
                    .args(["--overlap", overlap, "--lock-at-most", "20s", "--"])
                    .args(["bash", "-c", JOB, "bash"])
                    .arg(dir)
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    std::thread::sleep(Duration::from_secs(7));
    for i in &instances {
        common::signal(i.0.id(), libc::SIGTERM);
    }
    for i in &mut instances {
        let status = common::wait_exit(&mut i.0, Duration::from_secs(15));
        assert_eq!(
            status.code(),
            Some(0),
            "{overlap}: lockward cron on SIGTERM"
        );
    }
    let runs = std::fs::read_to_string(dir.join("runs")).unwrap_or_default();
    let mut by_fire: std::collections::BTreeMap<String, (Option<u128>, Option<u128>)> =
        Default::default();
    for line in runs.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [fire, what, ns] = parts[..] else {
            panic!("{overlap}: odd line {line:?}");
        };
        let entry = by_fire.entry(fire.to_string()).or_default();
        let ns: u128 = ns.parse().unwrap();
        match what {
            "start" => entry.0 = Some(ns),
            _ => entry.1 = Some(ns),
        }
    }
    let mut executions: Vec<(u128, u128)> = by_fire
        .iter()
        .map(|(fire, (start, end))| {
            (
                start.unwrap_or_else(|| panic!("{overlap}: {fire} never started")),
                end.unwrap_or_else(|| panic!("{overlap}: {fire} never ended: {runs}")),
            )
        })
        .collect();
    executions.sort();
    let out = Command::new(lockward())
        .args(["--store", store, "cron-log", &job, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{overlap}: {out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (executions, rows.as_array().unwrap().clone())
}

fn overlapping(executions: &[(u128, u128)]) -> usize {
    executions.windows(2).filter(|w| w[1].0 < w[0].1).count()
}

fn check_store(store: &str, dir: &Path) {
    let scheme = store.split("://").next().unwrap();
    for overlap in ["forbid", "allow", "replace"] {
        let sub = dir.join(overlap);
        std::fs::create_dir_all(&sub).unwrap();
        let (executions, rows) = three_instances(store, &sub, overlap);
        let skipped = rows.iter().filter(|r| r["skipped"] == true).count();
        eprintln!(
            "{scheme} {overlap}: {} executions, {} overlapping, {skipped} skipped in the ledger",
            executions.len(),
            overlapping(&executions)
        );
        match overlap {
            "forbid" => {
                assert!(executions.len() >= 2, "{scheme}: {executions:?}");
                assert_eq!(overlapping(&executions), 0, "{scheme}: {executions:?}");
                assert!(skipped >= 2, "{scheme}: no skips in the ledger: {rows:?}");
                assert!(
                    rows.iter()
                        .filter(|r| r["skipped"] == true)
                        .all(|r| r["outcome"]
                            .as_str()
                            .is_some_and(|o| o.starts_with("skipped: still running on"))),
                    "{rows:?}"
                );
            }
            "allow" => {
                assert!(overlapping(&executions) >= 2, "{scheme}: {executions:?}");
                assert_eq!(skipped, 0, "{scheme}: {rows:?}");
            }
            _ => {
                assert!(executions.len() >= 3, "{scheme}: {executions:?}");
                assert_eq!(overlapping(&executions), 0, "{scheme}: {executions:?}");
                let replaced = rows
                    .iter()
                    .filter(|r| {
                        r["outcome"]
                            .as_str()
                            .is_some_and(|o| o.contains("replaced"))
                    })
                    .count();
                assert!(replaced >= 2, "{scheme}: {rows:?}");
            }
        }
    }
}

#[test]
fn overlap_policies_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    check_store(&store, dir.path());
}

#[cfg(feature = "redis")]
#[test]
fn overlap_policies_on_redis() {
    let dir = tempfile::tempdir().unwrap();
    let redis = lockward_testkit::RedisServer::start();
    check_store(&redis.url(), dir.path());
}
