//! `lockward run` and `lockward status` on `redis://` and `redlock://`.
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
