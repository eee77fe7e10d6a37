//! The whole command tree is bounded by the lock: when lockward dies by
//! SIGKILL, or is frozen past its lease, CMD and everything it started (in
//! its group or not: a `setsid` daemon too) are gone before the store can
//! hand the lock on. For `run`, `sem`, `once`, `elect` and `cron`.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{alive, lockward, signal, wait_for_file, wait_gone, KillOnDrop};

/// CMD: a child in its group and a `setsid` grandchild in a session of its
/// own, their pids written to `DIR/child` and `DIR/daemon`. With `stubborn`,
/// all of them ignore SIGTERM.
fn tree_script(stubborn: bool) -> Vec<String> {
    let trap = if stubborn { "trap '' TERM; " } else { "" };
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            r#"{trap}sleep 300 & echo $! > "$1/child.tmp"; mv "$1/child.tmp" "$1/child"; setsid sleep 301 & echo $! > "$1/daemon.tmp"; mv "$1/daemon.tmp" "$1/daemon"; wait; wait"#
        ),
        "sh".into(),
    ]
}

fn pids(dir: &Path) -> (u32, u32) {
    let child = wait_for_file(&dir.join("child"), Duration::from_secs(20))
        .parse()
        .unwrap();
    let daemon = wait_for_file(&dir.join("daemon"), Duration::from_secs(20))
        .parse()
        .unwrap();
    (child, daemon)
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn sigkill_of_lockward_ends_the_whole_tree_of_every_command() {
    for command in [
        vec!["run", "tree"],
        vec!["sem", "tree-sem", "-n", "2"],
        vec!["once", "tree-once"],
        vec!["elect", "tree-elect"],
        vec!["cron", "tree-cron", "* * * * * *"],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("l.db").display());
        let lockward = KillOnDrop(
            Command::new(lockward())
                .args(["--store", &url])
                .args(&command)
                .arg("--")
                .args(tree_script(false))
                .arg(dir.path())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let (child, daemon) = pids(dir.path());
        assert!(
            alive(child) && alive(daemon),
            "{command:?}: the tree did not start"
        );
        signal(lockward.0.id(), libc::SIGKILL);
        let killed = Instant::now();
        assert!(
            wait_gone(child, Duration::from_secs(1)),
            "{command:?}: the child outlived lockward"
        );
        assert!(
            wait_gone(daemon, Duration::from_secs(1)),
            "{command:?}: the setsid daemon outlived lockward"
        );
        eprintln!(
            "{command:?}: tree gone {:?} after SIGKILL",
            killed.elapsed()
        );
    }
}

#[test]
fn a_frozen_lockward_loses_its_tree_by_the_local_deadline() {
    const TTL: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = format!("sqlite://{}", d.join("l.db").display());
    let mut first = KillOnDrop(
        Command::new(lockward())
            .args(["--store", &url, "run", "frozen", "--ttl", "2s", "--"])
            .args(tree_script(true))
            .arg(d)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (child, daemon) = pids(d);
    signal(first.0.id(), libc::SIGSTOP);
    let stopped = Instant::now();
    let stopped_ns = now_ns();
    let second = Command::new(lockward())
        .args(["--store", &url, "run", "frozen", "--wait", "10s", "--"])
        .args(["sh", "-c", r#"date +%s%N > "$1/second""#, "sh"])
        .arg(d)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut second = KillOnDrop(second);
    while alive(child) || alive(daemon) {
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "the tree outlived the lease"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let gone = stopped.elapsed();
    eprintln!("frozen lockward: tree gone {gone:?} after SIGSTOP (TTL {TTL:?})");
    let gone_ns = now_ns();
    // The local deadline is at most one TTL after the stop (the last
    // renewal came before it) and at least two thirds of one (renewals come
    // every TTL/3), less the drift allowance.
    let drift = TTL / 100 + Duration::from_millis(2);
    let slack = Duration::from_millis(100);
    assert!(gone <= TTL + slack, "gone {gone:?} after the stop");
    assert!(
        gone + slack >= TTL * 2 / 3 - drift,
        "gone {gone:?}: too early"
    );
    let status = common::wait_exit(&mut second.0, Duration::from_secs(10));
    assert!(status.success(), "{status}");
    let second_at: u128 = wait_for_file(&d.join("second"), Duration::from_secs(1))
        .parse()
        .unwrap();
    assert!(
        second_at >= gone_ns,
        "the second instance ran {} ms before the tree was gone",
        (gone_ns - second_at) / 1_000_000
    );
    assert!(second_at > stopped_ns);
    signal(first.0.id(), libc::SIGCONT);
    let status = common::wait_exit(&mut first.0, Duration::from_secs(10));
    assert_eq!(
        status.code(),
        Some(76),
        "the resumed lockward reports the loss"
    );
}
