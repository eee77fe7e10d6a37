//! Log lines on stderr: LOCKWARD_LOG filters them, `--log-format json`
//! writes one object per line with the lock, fence and store of each span,
//! and no password reaches them even at the most verbose level.

mod common;

use std::process::Command;

use lockward_testkit::{RedisOptions, RedisServer};
use serde_json::Value;

fn lockward(store: &str, log: &str, args: &[&str]) -> std::process::Output {
    Command::new(common::lockward())
        .args(["--store", store])
        .args(args)
        .env("LOCKWARD_LOG", log)
        .env_remove("RUST_LOG")
        .output()
        .expect("lockward runs")
}

#[test]
fn json_lines_carry_the_lock_its_fence_and_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("locks.db").display());
    let out = lockward(
        &store,
        "lockward=debug",
        &[
            "--log-format",
            "json",
            "run",
            "orders/42",
            "--",
            "sh",
            "-c",
            "echo $LOCKWARD_FENCE",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let fence: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    // The line written when the span closes carries every field it got.
    let span_of = |name: &str| {
        lines
            .iter()
            .filter(|l| l["fields"]["message"] == "close")
            .filter_map(|l| l.get("span"))
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} span in:\n{stderr}"))
            .clone()
    };
    let acquire = span_of("acquire");
    assert_eq!(acquire["lock"], "orders/42", "{acquire}");
    assert_eq!(acquire["store"], "sqlite", "{acquire}");
    assert_eq!(acquire["fence"], fence, "{acquire}");
    let release = span_of("release");
    assert_eq!(release["fence"], fence, "{release}");
    assert!(
        lines.iter().all(|l| l["level"] != "TRACE"),
        "the filter let TRACE through:\n{stderr}"
    );
}

#[test]
fn no_password_reaches_the_log_at_any_level() {
    let password = "pw-4f9c1e-never-logged";
    let redis = RedisServer::start_with(RedisOptions {
        password: Some(password.into()),
        ..Default::default()
    });
    let out = lockward(&redis.url(), "trace", &["run", "n", "--", "true"]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("acquire"),
        "nothing was logged at trace:\n{stderr}"
    );
    assert!(!stderr.contains(password), "{stderr}");

    let wrong = "wrong-pw-77d2a0";
    let url = redis.url().replace(password, wrong);
    let out = lockward(&url, "trace", &["run", "n", "--", "true"]);
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(wrong), "{stderr}");
}

#[test]
fn an_unreadable_filter_is_a_usage_error() {
    let out = lockward("memory://", "lockward=loud", &["status"]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("LOCKWARD_LOG"), "{stderr}");
}
