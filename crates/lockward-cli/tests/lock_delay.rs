//! `--lock-delay`: a holder killed with SIGKILL, or ended by `unlock
//! --force`, holds the name back for the delay after its lease ran out; a
//! clean release frees it at once; stores that free locks with the session
//! refuse it with 64.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{lockward, signal, wait_exit, wait_for_file, KillOnDrop};

const TTL: Duration = Duration::from_secs(2);
const DELAY: Duration = Duration::from_secs(3);

#[test]
fn a_killed_holder_holds_the_name_back_for_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = format!("sqlite://{}", d.join("l.db").display());
    let holder = KillOnDrop(
        Command::new(lockward())
            .args([
                "--store",
                &store,
                "run",
                "delayed",
                "--ttl",
                "2s",
                "--lock-delay",
                "3s",
            ])
            .args(["--", "sh", "-c", r#"echo up > "$1/up"; sleep 60"#, "sh"])
            .arg(d)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_file(&d.join("up"), Duration::from_secs(10));
    // Let a renewal or two pass, then kill it outright.
    std::thread::sleep(Duration::from_millis(1_500));
    signal(holder.0.id(), libc::SIGKILL);
    let killed = Instant::now();
    let next = Command::new(lockward())
        .args([
            "--store", &store, "run", "delayed", "--wait", "20s", "--", "true",
        ])
        .output()
        .unwrap();
    let waited = killed.elapsed();
    assert!(next.status.success(), "{next:?}");
    // The last renewal came at most TTL/3 before the kill, so the lease ran
    // out at least 2/3 TTL after it; the delay comes on top.
    let drift = (TTL + DELAY) / 100 + Duration::from_millis(2);
    assert!(
        waited + drift >= TTL * 2 / 3 + DELAY,
        "the next holder got the lock {waited:?} after the kill"
    );
    assert!(waited < TTL + DELAY + Duration::from_secs(2), "{waited:?}");
    eprintln!(
        "killed holder, TTL 2 s, lock-delay 3 s: the next holder got it {waited:?} after the kill"
    );

    // A clean release frees it at once.
    let done = Command::new(lockward())
        .args([
            "--store",
            &store,
            "run",
            "delayed",
            "--ttl",
            "2s",
            "--lock-delay",
            "3s",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(done.status.success(), "{done:?}");
    let released = Instant::now();
    let next = Command::new(lockward())
        .args([
            "--store",
            &store,
            "run",
            "delayed",
            "--no-wait",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(next.status.success(), "held back after a release: {next:?}");
    assert!(released.elapsed() < DELAY);
}

#[test]
fn a_forced_unlock_holds_the_name_back_for_a_holder_with_lock_delay() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = format!("sqlite://{}", d.join("l.db").display());
    let run = |args: &[&str]| {
        Command::new(lockward())
            .args(["--store", &store, "run", "forced"])
            .args(args)
            .output()
            .unwrap()
    };
    let mut holder = KillOnDrop(
        Command::new(lockward())
            .args(["--store", &store, "run", "forced", "--ttl", "2s"])
            .args(["--lock-delay", "3s", "--"])
            .args(["sh", "-c", r#"echo up > "$1/up"; sleep 60"#, "sh"])
            .arg(d)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_file(&d.join("up"), Duration::from_secs(10));
    let forced = Command::new(lockward())
        .args(["--store", &store, "unlock", "forced", "--force", "--yes"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let unlocked = Instant::now();
    assert!(forced.status.success(), "{forced:?}");
    let says = String::from_utf8_lossy(&forced.stdout);
    assert!(says.contains("lock-delay"), "{says}");
    let status = wait_exit(&mut holder.0, Duration::from_secs(8));
    assert_eq!(status.code(), Some(76), "the holder's command is stopped");

    let early = run(&["--no-wait", "--", "true"]);
    assert_eq!(
        early.status.code(),
        Some(75),
        "free inside the lock-delay: {early:?}"
    );
    let next = run(&["--wait", "20s", "--", "true"]);
    let waited = unlocked.elapsed();
    assert!(next.status.success(), "{next:?}");
    let drift = (TTL + DELAY) / 100 + Duration::from_millis(2);
    assert!(
        waited + drift >= DELAY,
        "the next holder got the lock {waited:?} after the forced unlock"
    );
    assert!(waited < TTL + DELAY + Duration::from_secs(2), "{waited:?}");
    eprintln!("forced unlock, TTL 2 s, lock-delay 3 s: the next holder got it {waited:?} after");
}

#[test]
fn bad_lock_delays_exit_64() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    for delay in ["-1s", "abc", "200years"] {
        let out = Command::new(lockward())
            .args([
                "--store",
                &store,
                "run",
                "x",
                "--lock-delay",
                delay,
                "--",
                "true",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{delay}: {out:?}");
    }
}

#[cfg(feature = "zookeeper")]
#[test]
fn session_stores_refuse_a_lock_delay() {
    let zk = lockward_testkit::ZookeeperEnsemble::start_single();
    let out = Command::new(lockward())
        .args([
            "--store",
            &zk.url(),
            "run",
            "x",
            "--lock-delay",
            "3s",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lock-delay"), "{stderr}");
}
