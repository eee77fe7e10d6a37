//! `lockward run` and `lockward status` on the embedded store: exit
//! statuses, environment, loss, signals, and the parent-death guarantee.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{alive, lockward, signal, wait_exit, wait_for_file, wait_gone};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn db(&self) -> PathBuf {
        self.dir.path().join("locks.db")
    }
    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }
    fn cmd(&self) -> Command {
        let mut c = Command::new(lockward());
        c.env(
            "LOCKWARD_STORE",
            format!("sqlite://{}", self.db().display()),
        );
        c
    }
    /// `lockward run NAME ARGS… -- sh -c SCRIPT sh DIR`, in the background.
    fn spawn_run(&self, name: &str, args: &[&str], script: &str) -> Child {
        self.cmd()
            .args(["run", name])
            .args(args)
            .args(["--", "sh", "-c", script, "sh"])
            .arg(self.dir.path())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
    fn run(&self, name: &str, args: &[&str], script: &str) -> (i32, String) {
        let out = self
            .spawn_run(name, args, script)
            .wait_with_output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn passes_exit_status_and_environment() {
    let env = Env::new();
    let (code, _) = env.run(
        "job",
        &[],
        r#"echo "$LOCKWARD_NAME $LOCKWARD_FENCE" > "$1/env"; exit 3"#,
    );
    assert_eq!(code, 3);
    let seen = std::fs::read_to_string(env.path("env")).unwrap();
    let (name, fence) = seen.trim().split_once(' ').unwrap();
    assert_eq!(name, "job");
    assert!(fence.parse::<u64>().unwrap() > 0);
    // A second run gets a larger fence.
    env.run("job", &[], r#"echo "$LOCKWARD_FENCE" > "$1/env2""#);
    let second: u64 = std::fs::read_to_string(env.path("env2"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(second > fence.parse().unwrap());
}

#[test]
fn lock_not_had_exits_75() {
    let env = Env::new();
    let mut holder = env.spawn_run("busy", &[], r#"touch "$1/started"; sleep 3"#);
    wait_for_file_exists(&env.path("started"));
    let (code, err) = env.run("busy", &["--no-wait"], r#"touch "$1/ran""#);
    assert_eq!(code, 75, "{err}");
    assert!(err.contains("held by another"), "{err}");
    let began = Instant::now();
    let (code, _) = env.run("busy", &["--wait", "300ms"], r#"touch "$1/ran""#);
    assert_eq!(code, 75);
    assert!(began.elapsed() >= Duration::from_millis(300));
    assert!(!env.path("ran").exists(), "CMD ran without the lock");
    holder.kill().unwrap();
    holder.wait().unwrap();
}

fn wait_for_file_exists(path: &Path) {
    let until = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(Instant::now() < until, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn waiter_runs_after_holder() {
    let env = Env::new();
    let mut first = env.spawn_run(
        "seq",
        &[],
        r#"touch "$1/started"; sleep 0.5; echo first >> "$1/order""#,
    );
    wait_for_file_exists(&env.path("started"));
    let (code, _) = env.run("seq", &[], r#"echo second >> "$1/order""#);
    assert_eq!(code, 0);
    assert!(first.wait().unwrap().success());
    let order = std::fs::read_to_string(env.path("order")).unwrap();
    assert_eq!(order, "first\nsecond\n");
}

#[test]
fn usage_errors_exit_64() {
    let env = Env::new();
    for args in [
        vec!["run", "", "--", "true"],
        vec!["run", "x", "--ttl", "0s", "--", "true"],
        vec!["run", "x", "--ttl", "10", "--", "true"],
        vec!["--store", "gopher://h", "status"],
        vec!["run", "x"],
    ] {
        let out = env.cmd().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{args:?}: {:?}", out);
    }
    let out = env
        .cmd()
        .args(["run", "x", "--", "no-such-command-here"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    let out = env.cmd().arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("75"));
}

#[test]
fn store_down_exits_69() {
    let env = Env::new();
    std::fs::write(env.path("file"), "").unwrap();
    let out = Command::new(lockward())
        .args([
            "--store",
            &format!("sqlite://{}/x/locks.db", env.path("file").display()),
        ])
        .args(["run", "x", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
}

#[test]
fn lost_lock_terminates_command() {
    let env = Env::new();
    let mut runner = env.spawn_run(
        "stolen",
        &["--ttl", "600ms"],
        r#"trap 'echo term > "$1/got"; exit 0' TERM; touch "$1/started"; while :; do sleep 0.05; done"#,
    );
    wait_for_file_exists(&env.path("started"));
    // Another owner takes the row over behind lockward's back: the next
    // renewal is refused and the command must be stopped.
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let changed = conn
        .execute(
            "UPDATE lockward_locks SET owner = x'00000000000000000000000000000000' WHERE name = 'stolen'",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let began = Instant::now();
    let status = wait_exit(&mut runner, Duration::from_secs(5));
    assert_eq!(status.code(), Some(76));
    assert_eq!(
        wait_for_file(&env.path("got"), Duration::from_secs(1)),
        "term"
    );
    // Renewal runs every TTL/3, so the loss is seen within about 200 ms.
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
}

#[test]
fn stubborn_command_is_killed_after_grace() {
    let env = Env::new();
    let mut runner = env.spawn_run(
        "stubborn",
        &["--ttl", "600ms", "--grace", "200ms"],
        r#"trap '' TERM; echo $$ > "$1/pid"; while :; do sleep 0.05; done"#,
    );
    let pid: u32 = wait_for_file(&env.path("pid"), Duration::from_secs(5))
        .parse()
        .unwrap();
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute(
        "UPDATE lockward_locks SET owner = x'00' WHERE name = 'stubborn'",
        [],
    )
    .unwrap();
    let status = wait_exit(&mut runner, Duration::from_secs(5));
    assert_eq!(status.code(), Some(76));
    assert!(
        wait_gone(pid, Duration::from_secs(1)),
        "CMD survived SIGKILL"
    );
}

#[test]
fn signals_are_forwarded() {
    let env = Env::new();
    let mut runner = env.spawn_run(
        "sig",
        &[],
        r#"trap 'echo int > "$1/got"; exit 5' INT; touch "$1/started"; while :; do sleep 0.05; done"#,
    );
    wait_for_file_exists(&env.path("started"));
    signal(runner.id(), libc::SIGINT);
    let status = wait_exit(&mut runner, Duration::from_secs(5));
    assert_eq!(status.code(), Some(5), "lockward exits with CMD's status");
    assert_eq!(
        wait_for_file(&env.path("got"), Duration::from_secs(1)),
        "int"
    );
    // And the lock was released on the way out.
    let (code, _) = env.run("sig", &["--no-wait"], "true");
    assert_eq!(code, 0);
}

#[test]
fn command_dies_with_lockward_even_on_sigkill() {
    let env = Env::new();
    let mut runner = env.spawn_run(
        "orphan",
        &[],
        r#"echo $$ > "$1/pid"; while :; do sleep 0.05; done"#,
    );
    let pid: u32 = wait_for_file(&env.path("pid"), Duration::from_secs(5))
        .parse()
        .unwrap();
    assert!(alive(pid));
    runner.kill().unwrap(); // SIGKILL: lockward gets no chance to clean up
    runner.wait().unwrap();
    assert!(
        wait_gone(pid, Duration::from_secs(2)),
        "CMD outlived lockward"
    );
}

#[test]
fn status_lists_held_locks() {
    let env = Env::new();
    let mut holder = env.spawn_run(
        "reports/daily",
        &["--ttl", "20s"],
        r#"touch "$1/started"; sleep 3"#,
    );
    wait_for_file_exists(&env.path("started"));
    let out = env
        .cmd()
        .args(["status", "reports/", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], "reports/daily");
    assert!(rows[0]["fence"].as_u64().unwrap() > 0);
    assert!(rows[0]["holder"].as_str().unwrap().contains(':'));
    let left = rows[0]["expires_in_ms"].as_u64().unwrap();
    assert!(left > 10_000 && left <= 20_000, "{left}");
    let table = env.cmd().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("NAME") && text.contains("reports/daily"),
        "{text}"
    );
    let none = env.cmd().args(["status", "other/"]).output().unwrap();
    assert!(String::from_utf8_lossy(&none.stdout).contains("no locks held"));
    holder.kill().unwrap();
    holder.wait().unwrap();
}
