//! `lockward sem` and `lockward once` with real processes, on every store.

mod common;

use common::{every_store, lockward};
use std::process::{Command, Output, Stdio};

/// The most lines "+" minus lines "-" seen at once in `log`, which the
/// commands append to as they start and end.
fn most_at_once(log: &str) -> i32 {
    let (mut now, mut most) = (0, 0);
    for line in log.lines() {
        now += if line == "+" { 1 } else { -1 };
        most = most.max(now);
    }
    most
}

/// 6 instances of `sem pool -n 2` started together: never more than 2 run
/// at once, 2 do run together, and all 6 run; the same by weight, with
/// `-n 100000 --take 40000` (`-n 10 --take 4` on ZooKeeper).
fn sem_on(store: &str) {
    sem_weighted_on(store, &["pool", "-n", "2"]);
    // On ZooKeeper a permit is a node (Curator's layout): fewer of them.
    if store.starts_with("zk://") {
        sem_weighted_on(store, &["weighted", "-n", "10", "--take", "4"]);
    } else {
        sem_weighted_on(store, &["weighted", "-n", "100000", "--take", "40000"]);
    }
    sem_holder_killed_on(store);
}

/// A `lockward sem` holding the only permit is killed with SIGKILL: the
/// permit is refused at once ("0 of 1 free"), and comes back after the
/// holder's TTL (2 s; on ZooKeeper when its session ends, 30 s); where the
/// holder's lock lives in its session (PostgreSQL advisory mode, MySQL
/// named locks) it is back at once.
fn sem_holder_killed_on(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let up = dir.path().join("up");
    let sem = |extra: &[&str], cmd: &[&str]| {
        Command::new(lockward())
            .args(["--store", store, "sem", "killed", "-n", "1", "--ttl", "2s"])
            .args(extra)
            .arg("--")
            .args(cmd)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The command records its PID (exec keeps it) so that we end it too.
    let script = format!("echo $$ > {}; exec sleep 60", up.display());
    let mut holder = sem(&[], &["sh", "-c", &script]);
    let started = std::time::Instant::now();
    while !up.exists() || std::fs::read_to_string(&up).unwrap().trim().is_empty() {
        assert!(
            started.elapsed().as_secs() < 30,
            "{store}: the holder never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    holder.kill().unwrap();
    holder.wait().unwrap();
    let killed_at = std::time::Instant::now();
    let pid: i32 = std::fs::read_to_string(&up)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The command may have ended with its keeper already.
    // SAFETY: kill(2) has no memory effects; the pid is the test's command.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    if store.contains("mode=advisory") || store.contains("mode=named") {
        // The holder's slot lock lived in its session, which ended with it.
        let back = sem(&["--wait", "10s"], &["true"])
            .wait_with_output()
            .unwrap();
        assert!(
            back.status.success(),
            "{store}: {}",
            String::from_utf8_lossy(&back.stderr)
        );
        assert!(
            killed_at.elapsed().as_secs() < 5,
            "{store}: {:?}",
            killed_at.elapsed()
        );
        return;
    }
    let refused = sem(&["--no-wait"], &["true"]).wait_with_output().unwrap();
    assert!(
        !refused.status.success(),
        "{store}: a second holder ran at once"
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("0 of 1 free"), "{store}: {said}");
    // ZooKeeper frees it when the session ends: 30 s after the kill.
    let back = sem(&["--wait", "60s"], &["true"])
        .wait_with_output()
        .unwrap();
    assert!(
        back.status.success(),
        "{store}: the killed holder's permit never came back: {}",
        String::from_utf8_lossy(&back.stderr)
    );
    eprintln!(
        "{store}: the permit came back {:?} after the kill",
        killed_at.elapsed()
    );
}

fn sem_weighted_on(store: &str, sem: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let script = r#"echo + >> "$1"; sleep 0.4; echo - >> "$1""#;
    let instances: Vec<_> = (0..6)
        .map(|_| {
            Command::new(lockward())
                .args(["--store", store, "sem"])
                .args(sem)
                .args(["--ttl", "5s", "--"])
                .args(["sh", "-c", script, "sh"])
                .arg(&log)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for i in instances {
        let out = i.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{store}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        log.lines().filter(|l| *l == "+").count(),
        6,
        "{store}: {log}"
    );
    assert_eq!(most_at_once(&log), 2, "{store}: {log}");
}

fn once(store: &str, key: &str, script: &str, dir: &std::path::Path) -> std::process::Child {
    Command::new(lockward())
        .args(["--store", store, "once", key, "--ttl", "5s", "--"])
        .args(["sh", "-c", script, "sh"])
        .arg(dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn once_status(store: &str, key: &str) -> String {
    let out: Output = Command::new(lockward())
        .args(["--store", store, "once", "--status", key])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The seed's migration: 5 instances start together, one runs it, the
/// others wait for it and exit 0 without running it; a later instance does
/// not run it either. A failed run leaves the key free for a retry.
fn once_on(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let migrate = r#"echo ran >> "$1/runs"; sleep 0.3"#;
    let instances: Vec<_> = (0..5)
        .map(|_| once(store, "migrate-7", migrate, dir.path()))
        .collect();
    for i in instances {
        let out = i.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{store}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let late = once(store, "migrate-7", migrate, dir.path())
        .wait_with_output()
        .unwrap();
    assert!(late.status.success());
    assert!(String::from_utf8_lossy(&late.stderr).contains("ran already"));
    let runs = std::fs::read_to_string(dir.path().join("runs")).unwrap();
    assert_eq!(
        runs.lines().count(),
        1,
        "{store}: the migration ran {runs:?}"
    );
    assert!(
        once_status(store, "migrate-7").contains("ran by"),
        "{store}"
    );

    let failing = once(store, "flaky", "exit 3", dir.path())
        .wait_with_output()
        .unwrap();
    assert_eq!(failing.status.code(), Some(3), "{store}");
    assert!(
        once_status(store, "flaky").contains("not run yet"),
        "{store}"
    );
    let retry = once(store, "flaky", "true", dir.path())
        .wait_with_output()
        .unwrap();
    assert!(retry.status.success(), "{store}");
    assert!(once_status(store, "flaky").contains("ran by"), "{store}");
}

#[test]
fn sem_and_once_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let every = every_store(dir.path());
    let runs: Vec<_> = every
        .urls
        .clone()
        .into_iter()
        .map(|store| {
            std::thread::spawn(move || {
                sem_on(&store);
                once_on(&store);
            })
        })
        .collect();
    for r in runs {
        r.join().unwrap();
    }
}

#[test]
fn sem_refuses_bad_permit_counts() {
    for (n, k) in [("0", "1"), ("1000000001", "1"), ("10", "0"), ("10", "11")] {
        let out = Command::new(lockward())
            .args([
                "--store",
                "memory://",
                "sem",
                "x",
                "-n",
                n,
                "--take",
                k,
                "--",
                "true",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{n} {k}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("permits"));
    }
}
