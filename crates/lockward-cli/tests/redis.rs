//! `lockward run` and `lockward status` on `redis://` and `redlock://`;
//! `lockward bench` with `replicas=`.
#![cfg(feature = "redis")]

mod common;

use std::process::Command;

use common::{check_run_and_status, lockward};
use lockward_testkit::{RedisMasters, RedisServer};

#[test]
fn run_and_status_on_redis() {
    let server = RedisServer::start();
    check_run_and_status(&server.url(), "nightly/report", |fence| {
        assert_eq!(
            server.cli(&["GET", "lockward:nightly/report:fence"]),
            fence.to_string()
        );
    });
}

#[test]
fn run_and_status_on_redlock() {
    let masters = RedisMasters::start(3, Default::default());
    check_run_and_status(&masters.url(), "quorum/job", |_| {});
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
fn bench_prices_replicas_against_the_same_url_without() {
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    replica.replicate(&primary);
    let url = format!("{}?prefix=bench:&replicas=1", primary.url());
    let out = Command::new(lockward())
        .args(["--store", &url, "bench", "--json", "--duration", "300ms"])
        .args(["--clients", "1", "--scale", "0", "--failover-lease", "0s"])
        .args(["--semaphore", "0", "--rw-clients", "0"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let replicas = &r["replicas"];
    let (with, without) = (
        replicas["with_p50_us"].as_f64().unwrap_or(0.0),
        replicas["without_p50_us"].as_f64().unwrap_or(0.0),
    );
    assert!(with > 0.0 && without > 0.0, "{r}");
    let ratio = replicas["ratio"].as_f64().unwrap_or(0.0);
    assert!((ratio - with / without).abs() < 0.01, "{r}");
    // Without replicas= there is nothing to price.
    let out = Command::new(lockward())
        .args([
            "--store",
            &primary.url(),
            "bench",
            "--json",
            "--duration",
            "100ms",
        ])
        .args(["--clients", "1", "--scale", "0", "--failover-lease", "0s"])
        .args(["--semaphore", "0", "--rw-clients", "0"])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["replicas"].is_null(), "{r}");
}
