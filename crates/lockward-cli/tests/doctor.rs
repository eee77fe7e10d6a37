//! `lockward doctor` on every store: the probe passes, each server's own
//! checks run, weak settings are reported, an unreachable store exits 69.

mod common;

use std::process::Command;

use common::{every_store, lockward};

fn doctor(store: &str) -> (Option<i32>, serde_json::Value) {
    let out = Command::new(lockward())
        .args(["--store", store, "doctor", "--json"])
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{store}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code(), report)
}

fn level_of<'a>(report: &'a serde_json::Value, check: &str) -> Option<&'a str> {
    report["findings"]
        .as_array()?
        .iter()
        .find(|f| f["check"].as_str().is_some_and(|c| c.ends_with(check)))
        .and_then(|f| f["level"].as_str())
}

#[test]
fn doctor_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let every = every_store(dir.path());
    for store in &every.urls {
        let (code, report) = doctor(store);
        let scheme = store.split("://").next().unwrap();
        assert_eq!(level_of(&report, "fences"), Some("ok"), "{store}: {report}");
        assert_eq!(
            level_of(&report, "mutual exclusion"),
            Some("ok"),
            "{store}: {report}"
        );
        match scheme {
            "sqlite" => assert_eq!(code, Some(0), "{report}"),
            "redis" => {
                assert_eq!(level_of(&report, "version"), Some("ok"), "{report}");
                // The testkit's server runs without AOF.
                assert_eq!(
                    level_of(&report, "persistence"),
                    Some("warning"),
                    "{report}"
                );
                assert_eq!(level_of(&report, "clock offset"), Some("ok"), "{report}");
                assert_eq!(code, Some(0), "{report}");
            }
            "redlock" => assert_eq!(level_of(&report, "masters"), Some("ok"), "{report}"),
            "etcd" => {
                assert_eq!(level_of(&report, "leader"), Some("ok"), "{report}");
                assert_eq!(
                    level_of(&report, "members"),
                    Some("warning"),
                    "one member: {report}"
                );
            }
            "zk" => assert_eq!(
                level_of(&report, "ensemble"),
                Some("warning"),
                "one node: {report}"
            ),
            "postgres" => {
                // The testkit's quick settings are what doctor must catch.
                assert_eq!(level_of(&report, "fsync"), Some("error"), "{report}");
                assert_eq!(level_of(&report, "pooler"), Some("ok"), "{report}");
                assert_eq!(code, Some(1), "{report}");
            }
            other => panic!("unexpected store {other}"),
        }
    }
}

#[test]
fn an_unreachable_store_exits_69_without_its_password() {
    let port = lockward_testkit::free_port();
    let out = Command::new(lockward())
        .args([
            "--store",
            &format!("redis://u:hunter2@127.0.0.1:{port}"),
            "doctor",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&port.to_string()), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}
