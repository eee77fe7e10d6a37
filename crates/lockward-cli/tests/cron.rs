//! 10 instances of `lockward cron` with a per-second expression for 10 s:
//! exactly one execution per fire time, counted from a side file the command
//! writes and from the ledger; fire times nobody ran show as missed.

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{lockward, KillOnDrop};

const INSTANCES: usize = 10;
const RUN_FOR: Duration = Duration::from_secs(10);

fn cron_on(store: &str) {
    let scheme = store.split("://").next().unwrap_or("store").to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut instances: Vec<KillOnDrop> = (0..INSTANCES)
        .map(|i| {
            let stderr = std::fs::File::create(dir.path().join(format!("stderr-{i}"))).unwrap();
            let child = Command::new(lockward())
                // At most 20 s: within a ZooKeeper session (30 s by default).
                .args(["--store", store, "cron", "tick", "* * * * * *"])
                .args(["--lock-at-most", "20s", "--"])
                .args([
                    "sh",
                    "-c",
                    r#"echo "$LOCKWARD_FIRE_TIME" >> "$1/runs""#,
                    "sh",
                ])
                .arg(dir.path())
                .stderr(stderr)
                .spawn()
                .unwrap();
            KillOnDrop(child)
        })
        .collect();
    std::thread::sleep(RUN_FOR);
    // SIGTERM, as a service manager stops them: an instance in the middle
    // of a run forwards it to CMD and records the outcome before exiting.
    for i in &instances {
        common::signal(i.0.id(), libc::SIGTERM);
    }
    for i in &mut instances {
        let status = common::wait_exit(&mut i.0, Duration::from_secs(10));
        assert_eq!(status.code(), Some(0), "{scheme}: lockward cron on SIGTERM");
    }
    let runs = std::fs::read_to_string(dir.path().join("runs")).unwrap_or_default();
    let mut per_fire: HashMap<&str, usize> = HashMap::new();
    for line in runs.lines() {
        *per_fire.entry(line).or_default() += 1;
    }
    let doubles: Vec<_> = per_fire.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        doubles.is_empty(),
        "{scheme}: fire times run twice: {doubles:?}"
    );
    assert!(
        per_fire.len() >= 7,
        "{scheme}: only {} fire times ran in {RUN_FOR:?}",
        per_fire.len()
    );

    // Later fire times went unrun: the ledger must say so.
    std::thread::sleep(Duration::from_millis(2_500));
    let out = Command::new(lockward())
        .args([
            "--store", store, "cron-log", "tick",
            // No expression: the one the instances recorded.
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{scheme}: {out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let ran: Vec<&serde_json::Value> = rows.iter().filter(|r| r["missed"] == false).collect();
    // At most one run can be under way when the instances stop (runs last
    // milliseconds, one fire time a second): it may end by the SIGTERM,
    // possibly before its command wrote its line.
    let interrupted = ran.iter().filter(|r| r["outcome"] != "succeeded").count();
    assert!(interrupted <= 1, "{scheme}: {ran:?}");
    assert!(
        ran.len() == per_fire.len() || ran.len() == per_fire.len() + interrupted,
        "{scheme}: ledger ({}) and side file ({}) disagree",
        ran.len(),
        per_fire.len()
    );
    let stderr_of = |instance: &str| {
        let pid = instance.rsplit(':').next().unwrap_or("");
        instances
            .iter()
            .position(|i| i.0.id().to_string() == pid)
            .and_then(|i| std::fs::read_to_string(dir.path().join(format!("stderr-{i}"))).ok())
            .unwrap_or_default()
    };
    for r in &ran {
        let outcome = r["outcome"].as_str().unwrap();
        if outcome == "failed: could not run (lockward status 70)" {
            // The run the SIGTERM interrupted lost its keeper: rare, and
            // only accepted when lockward said so (and ended its tree).
            let said = stderr_of(r["instance"].as_str().unwrap_or(""));
            eprintln!("{scheme}: the interrupted run lost its keeper: {r}\n{said}");
            assert!(said.contains("keeper"), "{scheme}: {r}: {said}");
            continue;
        }
        assert!(
            outcome == "succeeded" || outcome == "failed: exit status 143",
            "{scheme}: every run records its end: {r}\n{}",
            stderr_of(r["instance"].as_str().unwrap_or(""))
        );
        assert!(
            outcome != "succeeded"
                || per_fire
                    .keys()
                    .any(|f| chrono_eq(f, r["fire_time"].as_str().unwrap())),
            "{scheme}: {r}"
        );
    }
    let missed = rows.iter().filter(|r| r["missed"] == true).count();
    assert!(
        missed >= 1,
        "{scheme}: the stopped seconds were not reported missed"
    );
    eprintln!(
        "{scheme}: {} fire times, each run once; {missed} missed after the stop",
        per_fire.len()
    );
}

/// Two RFC 3339 texts name the same instant (offsets may differ in form).
fn chrono_eq(a: &str, b: &str) -> bool {
    match (
        chrono::DateTime::parse_from_rfc3339(a),
        chrono::DateTime::parse_from_rfc3339(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[test]
fn cron_runs_each_fire_time_once_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let every = common::every_store(dir.path());
    let stores = every.urls.clone();
    let runs: Vec<_> = stores
        .into_iter()
        .map(|s| std::thread::spawn(move || cron_on(&s)))
        .collect();
    for r in runs {
        r.join().unwrap();
    }
}

/// After its first run, SIGTERM still stops `lockward cron` at once (its
/// handler for forwarding signals to CMD must not swallow it), with 0.
#[test]
fn sigterm_between_runs_stops_cron() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("locks.db").display());
    let mut cron = Command::new(lockward())
        .args(["--store", &store, "cron", "tick", "* * * * * *", "--"])
        .args(["sh", "-c", r#"echo ran >> "$1/runs""#, "sh"])
        .arg(dir.path())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runs = dir.path().join("runs");
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&runs)
        .unwrap_or_default()
        .lines()
        .count()
        < 2
    {
        if std::time::Instant::now() > until {
            let _ = cron.kill();
            panic!("lockward cron ran fewer than 2 fire times in 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Half a second from the next fire time: between runs.
    std::thread::sleep(Duration::from_millis(300));
    let sent = std::time::Instant::now();
    common::signal(cron.id(), libc::SIGTERM);
    let status = common::wait_exit(&mut cron, Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
    assert!(
        sent.elapsed() < Duration::from_millis(500),
        "stopped only after {:?}: at the next fire time, not at once",
        sent.elapsed()
    );
}

#[test]
fn bad_expressions_and_zones_exit_64() {
    for args in [["cron", "j", "not cron"], ["cron", "j", "* * * * * * * *"]] {
        let out = Command::new(lockward())
            .args(["--store", "memory://"])
            .args(args)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{args:?}");
    }
    let out = Command::new(lockward())
        .args([
            "--store",
            "memory://",
            "cron",
            "j",
            "* * * * *",
            "--tz",
            "Mars/Olympus",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("time zone"));
}

/// One instance whose job outlasts its per-second schedule: the fire times
/// that passed while it ran are recorded missed (and shown so by
/// `cron-log`), not run late one after another.
#[test]
fn fire_times_passed_during_a_long_run_are_missed_not_run_late() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    let mut cron = KillOnDrop(
        Command::new(lockward())
            .args(["--store", &store, "cron", "slow", "* * * * * *", "--"])
            .args(["sleep", "2.5"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(7));
    common::signal(cron.0.id(), libc::SIGTERM);
    common::wait_exit(&mut cron.0, Duration::from_secs(10));
    let out = Command::new(lockward())
        .args(["--store", &store, "cron-log", "slow", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let ran: Vec<_> = rows
        .iter()
        .filter(|r| r["outcome"] == "succeeded")
        .collect();
    let recorded_missed: Vec<_> = rows
        .iter()
        .filter(|r| {
            r["missed"] == true
                && r["outcome"]
                    .as_str()
                    .is_some_and(|o| o.starts_with("missed:"))
        })
        .collect();
    assert!(
        (1..=3).contains(&ran.len()),
        "{} runs of a 2.5 s job in 7 s: {rows:#?}",
        ran.len()
    );
    assert!(recorded_missed.len() >= 2, "{rows:#?}");
    // Each run started within a second of its fire time: none ran late.
    for r in &ran {
        let fire = chrono::DateTime::parse_from_rfc3339(r["fire_time"].as_str().unwrap()).unwrap();
        let start = chrono::DateTime::parse_from_rfc3339(r["start"].as_str().unwrap()).unwrap();
        assert!(
            (start - fire).num_milliseconds() < 1_000,
            "a run started late: {r}"
        );
    }
}
