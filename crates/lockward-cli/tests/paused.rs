//! The seed's paused holder, with real processes: `lockward run` is stopped
//! with SIGSTOP past its TTL, another instance takes the lock with a larger
//! fence, and when the first resumes it notices the loss, stops its command
//! and exits 76.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{lockward, wait_for_file};

fn paused_holder_loses_to_a_larger_fence(store_url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let first = Command::new(lockward())
        .args([
            "--store", store_url, "run", "paused", "--ttl", "600ms", "--",
        ])
        .args([
            "sh",
            "-c",
            r#"echo "$LOCKWARD_FENCE" > "$1/first"; while :; do sleep 0.05; done"#,
            "sh",
        ])
        .arg(d)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let first_fence: u64 = wait_for_file(&d.join("first"), Duration::from_secs(10))
        .parse()
        .unwrap();
    unsafe { libc::kill(first.id() as i32, libc::SIGSTOP) };
    let second = Command::new(lockward())
        .args(["--store", store_url, "run", "paused", "--wait", "5s"])
        // Within the shortest session a test gives ZooKeeper.
        .args(["--ttl", "1s", "--"])
        .args(["sh", "-c", r#"echo "$LOCKWARD_FENCE" > "$1/second""#, "sh"])
        .arg(d)
        .output()
        .unwrap();
    assert!(second.status.success(), "{second:?}");
    let second_fence: u64 = wait_for_file(&d.join("second"), Duration::from_secs(1))
        .parse()
        .unwrap();
    assert!(
        second_fence > first_fence,
        "{second_fence} <= {first_fence}"
    );
    let resumed = Instant::now();
    unsafe { libc::kill(first.id() as i32, libc::SIGCONT) };
    let out = first.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(76),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("lost"));
    assert!(
        resumed.elapsed() < Duration::from_secs(2),
        "{:?}",
        resumed.elapsed()
    );
}

#[test]
fn sqlite_paused_holder() {
    let dir = tempfile::tempdir().unwrap();
    paused_holder_loses_to_a_larger_fence(&format!(
        "sqlite://{}",
        dir.path().join("l.db").display()
    ));
}

#[cfg(feature = "redis")]
#[test]
fn redis_paused_holder() {
    let server = lockward_testkit::RedisServer::start();
    paused_holder_loses_to_a_larger_fence(&server.url());
}

#[cfg(feature = "redis")]
#[test]
fn redlock_paused_holder() {
    let masters = lockward_testkit::RedisMasters::start(5, Default::default());
    paused_holder_loses_to_a_larger_fence(&masters.url());
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_paused_holder() {
    let etcd = lockward_testkit::EtcdCluster::start_single();
    paused_holder_loses_to_a_larger_fence(&etcd.url());
}

/// The stopped holder's session (1 s) expires: the server deletes its node.
#[cfg(feature = "zookeeper")]
#[test]
fn zookeeper_paused_holder() {
    let zk = lockward_testkit::ZookeeperEnsemble::start_single();
    paused_holder_loses_to_a_larger_fence(&format!("{}?session_timeout=1s", zk.url()));
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_lease_paused_holder() {
    let server = lockward_testkit::PostgresServer::start();
    paused_holder_loses_to_a_larger_fence(&server.url());
}
