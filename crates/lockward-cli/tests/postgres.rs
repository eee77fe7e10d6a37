//! `lockward run` and `lockward status` on `postgres://`, in both modes.
#![cfg(feature = "postgres")]

mod common;

use common::check_run_and_status;
use lockward_testkit::PostgresServer;

#[test]
fn run_and_status_on_postgres() {
    let server = PostgresServer::start();
    check_run_and_status(&server.url(), "migrate/v42", |fence| {
        let stored = server.psql("SELECT fence FROM lockward_locks WHERE name = 'migrate/v42'");
        assert_eq!(stored, fence.to_string());
    });
    check_run_and_status(
        &format!("{}?mode=advisory", server.url()),
        "migrate/v43",
        |_| {},
    );
}

/// Lease mode's line, with real processes: the waiter holding the name's
/// baton is stopped (SIGSTOP), the next one is killed (SIGKILL), the one
/// after is stopped in the server's queue (as a client cut off by the
/// network would be). The server ends the first one's idle session, the
/// killed one's line ends with its connection, the third is granted the
/// lock in its turn and keeps it for its 2 s lease (as a ZooKeeper waiter
/// keeps a lock until its session expires); the last still gets it then,
/// and the stopped ones run once they resume.
#[test]
fn stopped_and_killed_waiters_do_not_hold_up_the_line() {
    use common::{lockward, signal, wait_exit, wait_for_file};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let server = PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut holder = Command::new(lockward())
        .args(["--store", &server.url(), "run", "line", "--"])
        .args(["sh", "-c", r#"echo held > "$1/holding"; sleep 2"#, "sh"])
        .arg(d)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_file(&d.join("holding"), Duration::from_secs(10));
    let waiter = |who: &str| {
        let child = Command::new(lockward())
            .args([
                "--store",
                &server.url(),
                "run",
                "line",
                "--wait",
                "30s",
                "--ttl",
                "2s",
                "--",
            ])
            .args(["sh", "-c", r#"echo ran > "$1/$2""#, "sh"])
            .arg(d)
            .arg(who)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Each joins after the one before.
        std::thread::sleep(Duration::from_millis(300));
        child
    };
    let mut baton_holder = waiter("first");
    let mut killed = waiter("second");
    let mut cut_off = waiter("third");
    let mut last = waiter("last");
    signal(baton_holder.id(), libc::SIGSTOP);
    signal(killed.id(), libc::SIGKILL);
    killed.wait().unwrap();
    signal(cut_off.id(), libc::SIGSTOP);
    assert!(wait_exit(&mut holder, Duration::from_secs(10)).success());
    let ended = Instant::now();
    let ran = std::panic::catch_unwind(|| wait_for_file(&d.join("last"), Duration::from_secs(10)));
    assert!(
        ran.is_ok(),
        "the last waiter never ran; the lock: {}",
        server.psql("SELECT owner, holder, expires_at - now() FROM lockward_locks")
    );
    let after = ended.elapsed();
    eprintln!("the last waiter ran {after:?} after the holder ended");
    // The first's session ended after 3 s idle (it was told of releases,
    // so it looked at the row every 2 s), then the third's 2 s lease.
    assert!(after < Duration::from_millis(7_000), "{after:?}");
    assert!(!d.join("first").exists() && !d.join("third").exists());
    assert!(wait_exit(&mut last, Duration::from_secs(5)).success());
    signal(baton_holder.id(), libc::SIGCONT);
    signal(cut_off.id(), libc::SIGCONT);
    assert!(wait_exit(&mut baton_holder, Duration::from_secs(20)).success());
    assert!(wait_exit(&mut cut_off, Duration::from_secs(20)).success());
    assert!(!d.join("second").exists());
}
