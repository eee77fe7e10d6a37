//! `lockward run` and `lockward status` on `redis://`.
#![cfg(feature = "redis")]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{lockward, wait_for_file};
use lockward_testkit::RedisServer;

#[test]
fn run_and_status_on_redis() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut holder = Command::new(lockward())
        .args([
            "--store",
            &server.url(),
            "run",
            "nightly/report",
            "--ttl",
            "10s",
            "--",
        ])
        .args([
            "sh",
            "-c",
            r#"echo "$LOCKWARD_FENCE" > "$1/fence"; sleep 3"#,
            "sh",
        ])
        .arg(dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let fence: u64 = wait_for_file(&dir.path().join("fence"), Duration::from_secs(10))
        .parse()
        .unwrap();
    assert_eq!(
        server.cli(&["GET", "lockward:nightly/report:fence"]),
        fence.to_string()
    );
    let out = Command::new(lockward())
        .args(["--store", &server.url(), "status", "nightly/", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["name"], "nightly/report");
    assert_eq!(rows[0]["fence"].as_u64(), Some(fence));
    let busy = Command::new(lockward())
        .args([
            "--store",
            &server.url(),
            "run",
            "nightly/report",
            "--no-wait",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(busy.status.code(), Some(75));
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn unreachable_redis_exits_69() {
    let port = lockward_testkit::free_port();
    let out = Command::new(lockward())
        .args([
            "--store",
            &format!("redis://127.0.0.1:{port}"),
            "run",
            "x",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unavailable"));
}

#[test]
fn run_and_status_on_redlock() {
    let masters = lockward_testkit::RedisMasters::start(3, Default::default());
    let dir = tempfile::tempdir().unwrap();
    let mut holder = Command::new(lockward())
        .args([
            "--store",
            &masters.url(),
            "run",
            "quorum/job",
            "--ttl",
            "10s",
            "--",
        ])
        .args([
            "sh",
            "-c",
            r#"echo "$LOCKWARD_FENCE" > "$1/fence"; sleep 3"#,
            "sh",
        ])
        .arg(dir.path())
        .spawn()
        .unwrap();
    let fence: u64 = wait_for_file(&dir.path().join("fence"), Duration::from_secs(10))
        .parse()
        .unwrap();
    let out = Command::new(lockward())
        .args(["--store", &masters.url(), "status", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["name"], "quorum/job");
    assert_eq!(rows[0]["fence"].as_u64(), Some(fence));
    holder.kill().unwrap();
    holder.wait().unwrap();
}
