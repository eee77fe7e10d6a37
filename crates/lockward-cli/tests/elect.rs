//! `lockward elect`: one leader's command at a time; kill -9 of the leader's
//! lockward kills its command and a new leader follows within lease +
//! retry; a graceful stop hands over at once.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{alive, lockward, wait_gone};

const SCRIPT: &str = r#"echo "$LOCKWARD_EPOCH $$ $LOCKWARD_PID" >> "$1/leaders"; trap 'exit 0' TERM; while :; do sleep 0.02; done"#;

fn candidate(store: &str, dir: &std::path::Path, id: &str) -> Child {
    Command::new(lockward())
        .args(["--store", store, "elect", "scheduler", "--identity", id])
        .args([
            "--lease",
            "1s",
            "--renew-deadline",
            "700ms",
            "--retry",
            "200ms",
            "--",
        ])
        .args(["sh", "-c", SCRIPT, "sh"])
        .arg(dir)
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// (epoch, command pid, lockward pid) of each leadership so far.
fn leaders(dir: &std::path::Path) -> Vec<(u64, u32, u32)> {
    std::fs::read_to_string(dir.join("leaders"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

fn wait_leaders(dir: &std::path::Path, n: usize, within: Duration) -> Vec<(u64, u32, u32)> {
    let until = Instant::now() + within;
    loop {
        let l = leaders(dir);
        if l.len() >= n {
            return l;
        }
        assert!(
            Instant::now() < until,
            "only {} leaderships after {within:?}",
            l.len()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `floor`: how much later than its TTL the store may free a lease (etcd
/// counts whole seconds and sweeps expiries every 500 ms).
fn failover_and_handover(store: &str, floor: Duration) {
    let scheme = store.split("://").next().unwrap_or("store");
    let dir = tempfile::tempdir().unwrap();
    let mut candidates: Vec<Child> = ["a", "b", "c"]
        .iter()
        .map(|id| candidate(store, dir.path(), id))
        .collect();
    let first = wait_leaders(dir.path(), 1, Duration::from_secs(10))[0];
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(
        leaders(dir.path()).len(),
        1,
        "a second leader while the first led"
    );

    // kill -9 the leader's lockward: its command dies with it, and another
    // candidate leads within lease + retry.
    let killed_at = Instant::now();
    unsafe { libc::kill(first.2 as i32, libc::SIGKILL) };
    assert!(
        wait_gone(first.1, Duration::from_secs(2)),
        "the dead leader's command kept running"
    );
    let second = wait_leaders(dir.path(), 2, Duration::from_secs(5))[1];
    let failover = killed_at.elapsed();
    eprintln!("{scheme}: failover after kill -9 in {failover:?} (lease 1 s, retry 200 ms)");
    assert!(
        failover < Duration::from_millis(1_200 + 500) + floor,
        "{failover:?}"
    );
    assert!(second.0 > first.0, "epochs must grow");

    // A graceful stop (SIGTERM to lockward, forwarded; the command exits;
    // the lock is released): the next candidate leads at once.
    let stopped_at = Instant::now();
    unsafe { libc::kill(second.2 as i32, libc::SIGTERM) };
    let third = wait_leaders(dir.path(), 3, Duration::from_secs(5))[2];
    let handover = stopped_at.elapsed();
    eprintln!("{scheme}: handover after a graceful stop in {handover:?}");
    assert!(handover < Duration::from_millis(500), "{handover:?}");
    assert!(third.0 > second.0);
    assert!(alive(third.1));
    for c in &mut candidates {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn elect_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    failover_and_handover(
        &format!("sqlite://{}", dir.path().join("l.db").display()),
        Duration::ZERO,
    );
}

#[cfg(feature = "redis")]
#[test]
fn elect_on_redis() {
    let server = lockward_testkit::RedisServer::start();
    failover_and_handover(&server.url(), Duration::ZERO);
}

#[cfg(feature = "redis")]
#[test]
fn elect_on_redlock() {
    let masters = lockward_testkit::RedisMasters::start(3, Default::default());
    failover_and_handover(&masters.url(), Duration::ZERO);
}

#[cfg(feature = "etcd")]
#[test]
fn elect_on_etcd() {
    let etcd = lockward_testkit::EtcdCluster::start_single();
    failover_and_handover(&etcd.url(), Duration::from_millis(1_500));
}

#[cfg(feature = "zookeeper")]
#[test]
fn elect_on_zookeeper() {
    let zk = lockward_testkit::ZookeeperEnsemble::start_single();
    failover_and_handover(&format!("{}?session_timeout=1s", zk.url()), Duration::ZERO);
}

#[cfg(feature = "postgres")]
#[test]
fn elect_on_postgres() {
    let server = lockward_testkit::PostgresServer::start();
    failover_and_handover(&server.url(), Duration::ZERO);
}

#[test]
fn renew_deadline_must_be_below_the_lease() {
    let out = Command::new(lockward())
        .args([
            "--store",
            "memory://",
            "elect",
            "x",
            "--lease",
            "1s",
            "--renew-deadline",
            "2s",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("renew deadline"));
}

/// The leader's lockward stopped with SIGSTOP past its lease: its command
/// is gone by the lease's local deadline (its keeper holds it), before
/// another candidate is elected with a larger epoch; when the old one
/// resumes it sees it was revoked.
#[test]
fn stopped_leader_is_replaced_and_revoked_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    let mut a = common::KillOnDrop(candidate(&store, dir.path(), "a"));
    let first = wait_leaders(dir.path(), 1, Duration::from_secs(10))[0];
    let _b = common::KillOnDrop(candidate(&store, dir.path(), "b"));
    unsafe { libc::kill(first.2 as i32, libc::SIGSTOP) };
    let second = wait_leaders(dir.path(), 2, Duration::from_secs(5))[1];
    assert!(second.0 > first.0);
    assert!(
        !alive(first.1),
        "the stopped leader's command ran on past its lease"
    );
    unsafe { libc::kill(first.2 as i32, libc::SIGCONT) };
    assert!(alive(second.1));
    // `a` campaigns again; SIGTERM still stops it (the handler it used to
    // forward signals to its command must not swallow this one).
    std::thread::sleep(Duration::from_millis(300));
    common::signal(a.0.id(), libc::SIGTERM);
    let status = common::wait_exit(&mut a.0, Duration::from_secs(3));
    assert_eq!(
        status.code(),
        Some(0),
        "a campaigning lockward elect on SIGTERM"
    );
    assert!(alive(second.1), "stopping a follower disturbed the leader");
}
