//! `lockward demo --json`: every protected variant shows no anomaly, and the
//! unprotected ones show the problem, on the embedded store and on every
//! server backend.

mod common;

use std::process::Command;

use common::{every_store, lockward};

fn demo(store: Option<&str>) -> serde_json::Value {
    let mut cmd = Command::new(lockward());
    if let Some(store) = store {
        cmd.args(["--store", store]);
    }
    let out = cmd.args(["demo", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{store:?}: not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let passed = report["passed"].as_bool().unwrap();
    assert_eq!(out.status.success(), passed, "{report}");
    report
}

fn check(report: &serde_json::Value) {
    let rows = report["scenarios"].as_array().unwrap();
    let scenarios: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(scenarios.len(), 6, "{report}");
    for r in rows {
        if r["protected"].as_bool().unwrap() {
            assert_eq!(r["anomalies"].as_u64(), Some(0), "{r}");
        }
    }
    let shown = rows
        .iter()
        .filter(|r| !r["protected"].as_bool().unwrap())
        .filter(|r| r["anomalies"].as_u64().unwrap() > 0)
        .count();
    assert!(
        shown >= 1,
        "no unprotected variant showed the problem: {report}"
    );
    assert_eq!(report["passed"], true, "{report}");
    let paused: Vec<_> = rows
        .iter()
        .filter(|r| r["scenario"] == "paused holder")
        .collect();
    assert!(
        paused
            .iter()
            .all(|r| r["detail"]["stopped (state T)"] == "true"),
        "{report}"
    );
}

#[test]
fn demo_on_the_embedded_store() {
    let report = demo(None);
    check(&report);
    // Readers of the price report shared the read-write lock.
    let rows = report["scenarios"].as_array().unwrap();
    let report_row = rows
        .iter()
        .find(|r| r["scenario"] == "price report" && r["variant"] == "rwlock")
        .unwrap_or_else(|| panic!("no price report row: {report}"));
    let together: u64 = report_row["detail"]["most readers at once"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(together >= 2, "readers never shared: {report_row}");
}

#[test]
fn demo_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let every = every_store(dir.path());
    let runs: Vec<_> = every
        .urls
        .clone()
        .into_iter()
        .skip(1) // SQLite: the test above
        .map(|store| {
            std::thread::spawn(move || {
                let report = demo(Some(&store));
                check(&report);
                if store.starts_with("postgres") || store.starts_with("mysql") {
                    // The database's own answer is shown beside lockward's.
                    let rows = report["scenarios"].as_array().unwrap();
                    let for_update = rows
                        .iter()
                        .find(|r| r["variant"] == "for-update")
                        .unwrap_or_else(|| panic!("no SELECT … FOR UPDATE row: {report}"));
                    assert_eq!(for_update["detail"]["sold"], "5", "{report}");
                }
                // (A session lock stays with the paused holder's session.)
                let session_lock = store.contains("mode=advisory") || store.contains("mode=named");
                if (store.starts_with("postgres") || store.starts_with("mysql")) && !session_lock {
                    // The database itself refused the resumed holder.
                    let rows = report["scenarios"].as_array().unwrap();
                    let guarded = rows
                        .iter()
                        .find(|r| r["variant"] == "db-guarded")
                        .unwrap_or_else(|| panic!("no db-guarded row: {report}"));
                    assert_eq!(guarded["detail"]["late writes refused"], "1", "{report}");
                    assert_eq!(guarded["detail"]["final value"], "\"B\"", "{report}");
                }
            })
        })
        .collect();
    for r in runs {
        r.join().unwrap();
    }
}

#[test]
fn demo_refuses_a_private_store() {
    let out = Command::new(lockward())
        .args(["--store", "memory://", "demo"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("separate processes"));
}

#[test]
fn the_losses_the_demo_causes_on_purpose_are_not_warned_about() {
    let out = Command::new(lockward())
        .args(["demo"])
        .env_remove("LOCKWARD_LOG")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("lease lost"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("paused holder"));
}

#[test]
fn demo_failover_shows_a_lock_granted_twice_and_the_fence_that_saves_it() {
    let out = Command::new(lockward())
        .args(["demo", "--json", "--failover"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{report}");
    let rows: Vec<&serde_json::Value> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["scenario"] == "paused holder, the store fails over")
        .collect();
    assert_eq!(rows.len(), 2, "{report}");
    for r in &rows {
        let d = &r["detail"];
        assert_eq!(d["stopped (state T)"], "true", "{r}");
        assert_eq!(d["replica promoted"], "true", "{r}");
        // The promoted replica granted the lock again, with a larger fence
        // although it never saw A's.
        let fence = |k: &str| d[k].as_str().and_then(|f| f.parse::<u64>().ok());
        let (a, b) = (
            fence("A's fence (on the old primary)"),
            fence("B's fence (on the promoted replica)"),
        );
        assert!(a.is_some() && b > a, "{r}");
    }
    let unfenced = rows.iter().find(|r| r["variant"] == "unfenced").unwrap();
    assert_eq!(unfenced["anomalies"], 1, "the late write won: {unfenced}");
    let fenced = rows.iter().find(|r| r["variant"] == "fenced").unwrap();
    assert_eq!(fenced["anomalies"], 0, "{fenced}");
    assert_eq!(fenced["detail"]["late writes refused"], "1", "{fenced}");
}
