//! `lockward run` and `lockward status` on `etcd://`, and `lockward run`
//! against `etcdctl lock` on the same name.
#![cfg(feature = "etcd")]

mod common;

use std::process::Command;
use std::time::Duration;

use common::{lockward, wait_for_file};
use lockward_testkit::EtcdCluster;

#[test]
fn run_and_status_on_etcd() {
    let etcd = EtcdCluster::start_single();
    let dir = tempfile::tempdir().unwrap();
    let mut holder = Command::new(lockward())
        .args([
            "--store",
            &etcd.url(),
            "run",
            "deploy",
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
        .args(["--store", &etcd.url(), "status", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["name"], "deploy");
    assert_eq!(rows[0]["fence"].as_u64(), Some(fence));
    assert!(rows[0]["holder"].as_str().unwrap().contains(':'));
    // etcdctl sees lockward's holder on the same key prefix.
    let keys = etcd.etcdctl(&["get", "--prefix", "--keys-only", "lockward/deploy/"]);
    assert!(keys.starts_with("lockward/deploy/"), "{keys}");
    let busy = Command::new(lockward())
        .args([
            "--store",
            &etcd.url(),
            "run",
            "deploy",
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
