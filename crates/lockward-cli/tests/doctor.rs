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
        // What the store can do, with the forced unlock where it cannot.
        let capabilities = report["findings"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["check"] == "capabilities"))
            .and_then(|f| f["detail"].as_str())
            .unwrap_or_else(|| panic!("{store}: no capabilities: {report}"));
        let refused = capabilities
            .split_once("not:")
            .is_some_and(|(_, not)| not.contains("forced unlock"));
        assert_eq!(
            refused,
            common::session_locks(store),
            "{store}: {capabilities}"
        );
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
                // Lease mode's waiters take turns in the server's queue.
                let waiting = (!store.contains("mode=advisory")).then_some("ok");
                assert_eq!(level_of(&report, "waiting"), waiting, "{report}");
                assert_eq!(code, Some(1), "{report}");
            }
            "mysql" => {
                assert!(report.to_string().contains("MariaDB"), "{report}");
                // The testkit's quick commits are what doctor must catch.
                assert_eq!(
                    level_of(&report, "innodb_flush_log_at_trx_commit"),
                    Some("error"),
                    "{report}"
                );
                assert_eq!(level_of(&report, "probe"), Some("ok"), "{report}");
                assert_eq!(level_of(&report, "proxy"), Some("ok"), "{report}");
                assert_eq!(level_of(&report, "clock offset"), Some("ok"), "{report}");
                assert_eq!(code, Some(1), "{report}");
            }
            "k8s" => {
                assert_eq!(level_of(&report, "version"), Some("ok"), "{report}");
                assert!(report.to_string().contains("Kubernetes v1."), "{report}");
                assert_eq!(level_of(&report, "access"), Some("ok"), "{report}");
                assert_eq!(level_of(&report, "clock offset"), Some("ok"), "{report}");
                assert_eq!(code, Some(0), "{report}");
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

/// The doctor says which layers bound a command's tree here, each tried:
/// the subreapers always on Linux; the cgroup as the machine allows, and
/// a warning when it is turned off.
#[test]
fn doctor_reports_the_command_tree_layers() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    let (_, report) = doctor(&store);
    assert_eq!(
        level_of(&report, "command tree: subreapers"),
        Some("ok"),
        "{report}"
    );
    let expected = if can_make_a_cgroup() { "ok" } else { "warning" };
    eprintln!("this machine's cgroup layer: {expected}");
    assert_eq!(
        level_of(&report, "command tree: cgroup"),
        Some(expected),
        "{report}"
    );
    let out = Command::new(lockward())
        .args(["--store", &store, "doctor", "--json"])
        .env("LOCKWARD_CGROUP", "off")
        .output()
        .unwrap();
    let off: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        level_of(&off, "command tree: cgroup"),
        Some("warning"),
        "{off}"
    );
    let detail = off["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "command tree: cgroup")
        .unwrap()["detail"]
        .to_string();
    assert!(detail.contains("LOCKWARD_CGROUP=off"), "{detail}");
}

/// Whether this process can make a cgroup v2 under its own (what the
/// doctor's probe needs first).
fn can_make_a_cgroup() -> bool {
    let Ok(own) = common::own_cgroup_dir() else {
        return false;
    };
    let dir = own.join(format!("lockward-doctor-test-{}", std::process::id()));
    let made = std::fs::create_dir(&dir).is_ok() && dir.join("cgroup.kill").exists();
    let _ = std::fs::remove_dir(&dir);
    made
}
