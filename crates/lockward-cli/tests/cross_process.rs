//! 8 workers, each running `lockward run` 25 times on one store; every run
//! does an unprotected read–sleep–write of a shared counter file and appends
//! its `LOCKWARD_FENCE` to a log. No update may be lost, and the fences must
//! increase in the order the writes happened.

mod common;

use std::process::Command;

const WORKERS: usize = 8;
const RUNS: usize = 25;

/// A read–sleep–write that loses updates unless runs are serialised.
const CRITICAL_SECTION: &str = r#"
n=$(cat "$1/counter")
sleep 0.002
echo $((n + 1)) > "$1/counter"
echo "$LOCKWARD_FENCE" >> "$1/fences"
"#;

pub fn run_cross_process(store_url: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("counter"), "0\n").unwrap();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let url = store_url.to_string();
            let path = dir.path().to_path_buf();
            std::thread::spawn(move || {
                for _ in 0..RUNS {
                    let out = Command::new(common::lockward())
                        .args(["--store", &url, "run", "shared-file", "--ttl", "10s", "--"])
                        .args(["sh", "-c", CRITICAL_SECTION, "sh"])
                        .arg(&path)
                        .output()
                        .expect("start lockward");
                    assert!(
                        out.status.success(),
                        "lockward run failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let counter = std::fs::read_to_string(dir.path().join("counter")).unwrap();
    assert_eq!(counter.trim(), (WORKERS * RUNS).to_string(), "lost updates");
    let fences: Vec<u64> = std::fs::read_to_string(dir.path().join("fences"))
        .unwrap()
        .lines()
        .map(|l| l.parse().expect("fence is a number"))
        .collect();
    assert_eq!(fences.len(), WORKERS * RUNS);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences not increasing in write order: {fences:?}"
    );
}

#[test]
fn sqlite_cross_process() {
    let dir = tempfile::tempdir().unwrap();
    run_cross_process(&format!(
        "sqlite://{}",
        dir.path().join("locks.db").display()
    ));
}

/// Positive control: the same workload without lockward loses updates, so
/// the test above would notice a lock that does not exclude.
#[test]
fn unprotected_workload_loses_updates() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("counter"), "0\n").unwrap();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let path = dir.path().to_path_buf();
            std::thread::spawn(move || {
                for _ in 0..RUNS {
                    Command::new("sh")
                        .args(["-c", CRITICAL_SECTION, "sh"])
                        .arg(&path)
                        .env("LOCKWARD_FENCE", "0")
                        .status()
                        .unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let counter = std::fs::read_to_string(dir.path().join("counter")).unwrap();
    let total: usize = counter.trim().parse().unwrap_or(0);
    assert!(
        total < WORKERS * RUNS,
        "no update lost without the lock ({total})"
    );
}

#[cfg(feature = "redis")]
#[test]
fn redis_cross_process() {
    let server = lockward_testkit::RedisServer::start();
    run_cross_process(&server.url());
}

#[cfg(feature = "redis")]
#[test]
fn redlock_cross_process() {
    let masters = lockward_testkit::RedisMasters::start(3, Default::default());
    run_cross_process(&masters.url());
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_cross_process() {
    let etcd = lockward_testkit::EtcdCluster::start_single();
    run_cross_process(&etcd.url());
}

#[cfg(feature = "zookeeper")]
#[test]
fn zookeeper_cross_process() {
    let zk = lockward_testkit::ZookeeperEnsemble::start_single();
    run_cross_process(&zk.url());
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_cross_process_both_modes() {
    let server = lockward_testkit::MariadbServer::start();
    run_cross_process(&server.url());
    run_cross_process(&format!("{}?mode=named", server.url()));
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_cross_process_both_modes() {
    let server = lockward_testkit::PostgresServer::start();
    run_cross_process(&server.url());
    run_cross_process(&format!("{}?mode=advisory", server.url()));
}
