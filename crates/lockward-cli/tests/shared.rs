//! `lockward run NAME --shared`: shared runs hold together, a run without
//! `--shared` waits for them and goes before shared runs that come after
//! it, fences order them all.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{lockward, wait_exit, wait_for_file, KillOnDrop};

/// `lockward run report [--shared] -- sh -c SCRIPT sh DIR TAG`.
fn spawn(store: &str, dir: &Path, shared: bool, tag: &str, script: &str) -> Child {
    let mut cmd = Command::new(lockward());
    cmd.args(["--store", store, "run", "report", "--wait", "30s"]);
    if shared {
        cmd.arg("--shared");
    }
    cmd.args(["--", "sh", "-c", script, "sh"])
        .arg(dir)
        .arg(tag)
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Records "TAG start NS FENCE" and "TAG end NS" around a pause.
const STEP: &str = r#"echo "$2 start $(date +%s%N) $LOCKWARD_FENCE" >> "$1/log"; sleep 1; echo "$2 end $(date +%s%N)" >> "$1/log""#;

#[test]
fn shared_runs_hold_together_and_the_write_side_waits_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = format!("sqlite://{}", d.join("l.db").display());
    // Three readers, each waiting until all three are inside at once.
    let together = r#"echo in > "$1/in-$2"; for i in $(seq 1 200); do [ -e "$1/in-r1" ] && [ -e "$1/in-r2" ] && [ -e "$1/in-r3" ] && break; sleep 0.05; done; [ -e "$1/in-r1" ] && [ -e "$1/in-r2" ] && [ -e "$1/in-r3" ] && echo "$2 start $(date +%s%N) $LOCKWARD_FENCE" >> "$1/log"; sleep 1; echo "$2 end $(date +%s%N)" >> "$1/log""#;
    let readers: Vec<KillOnDrop> = ["r1", "r2", "r3"]
        .iter()
        .map(|tag| KillOnDrop(spawn(&store, d, true, tag, together)))
        .collect();
    wait_for_file(&d.join("in-r3"), Duration::from_secs(10));
    let writer = KillOnDrop(spawn(&store, d, false, "w", STEP));
    std::thread::sleep(Duration::from_millis(400));
    let late = KillOnDrop(spawn(&store, d, true, "late", STEP));
    for mut child in readers.into_iter().chain([writer, late]) {
        let status = wait_exit(&mut child.0, Duration::from_secs(30));
        assert!(status.success(), "{status}");
    }
    let log = std::fs::read_to_string(d.join("log")).unwrap();
    let field = |tag: &str, what: &str, i: usize| -> u128 {
        log.lines()
            .find(|l| l.starts_with(&format!("{tag} {what} ")))
            .unwrap_or_else(|| panic!("no {tag} {what}: {log}"))
            .split_whitespace()
            .nth(i)
            .unwrap()
            .parse()
            .unwrap()
    };
    for r in ["r1", "r2", "r3"] {
        assert!(
            field("w", "start", 2) >= field(r, "end", 2),
            "the writer ran beside {r}: {log}"
        );
        assert!(
            field("w", "start", 3) > field(r, "start", 3),
            "fences: {log}"
        );
    }
    assert!(
        field("late", "start", 2) >= field("w", "end", 2),
        "a later shared run overtook the waiting writer: {log}"
    );
    assert!(
        field("late", "start", 3) > field("w", "start", 3),
        "fences: {log}"
    );
}

#[test]
fn shared_takes_one_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    let out = Command::new(lockward())
        .args(["--store", &store, "run", "a", "b", "--shared", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
}

#[test]
fn status_shows_readers_apart() {
    let dir = tempfile::tempdir().unwrap();
    let every = common::every_store(dir.path());
    for (i, store) in every.urls.iter().enumerate() {
        let d = dir.path().join(i.to_string());
        std::fs::create_dir(&d).unwrap();
        let hold = r#"echo in > "$1/in-$2"; sleep 30"#;
        let _readers: Vec<KillOnDrop> = ["a", "b"]
            .iter()
            .map(|tag| KillOnDrop(spawn(store, &d, true, tag, hold)))
            .collect();
        wait_for_file(&d.join("in-a"), Duration::from_secs(10));
        wait_for_file(&d.join("in-b"), Duration::from_secs(10));
        let out = Command::new(lockward())
            .args(["--store", store, "status", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{store}: {out:?}");
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let readers: Vec<&serde_json::Value> = rows
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["lock"] == "report" && r["kind"] == "read")
            .collect();
        assert_eq!(readers.len(), 2, "{store}: {rows}");
        let table = Command::new(lockward())
            .args(["--store", store, "status"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&table.stdout);
        assert!(text.contains("KIND"), "{store}: {text}");
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("report ") && l.contains(" read "))
                .count(),
            2,
            "{store}: {text}"
        );
    }
}

/// The write side waits for readers only as long as `--wait` allows, one
/// wait over the lock and the readers; `--no-wait` does not wait at all.
#[test]
fn the_write_side_gives_up_on_readers_when_its_wait_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = format!("sqlite://{}", d.join("l.db").display());
    let _reader = KillOnDrop(spawn(
        &store,
        d,
        true,
        "r",
        r#"echo in > "$1/in-$2"; sleep 30"#,
    ));
    wait_for_file(&d.join("in-r"), Duration::from_secs(10));
    let began = std::time::Instant::now();
    let out = Command::new(lockward())
        .args([
            "--store", &store, "run", "report", "--wait", "1s", "--", "true",
        ])
        .output()
        .unwrap();
    let took = began.elapsed();
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let out = Command::new(lockward())
        .args([
            "--store",
            &store,
            "run",
            "report",
            "--no-wait",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(75), "{out:?}");
}
