//! `lockward status --watch`: a live view of locks, elections and cron jobs,
//! as JSON per refresh on every store, and as a terminal screen in tmux that
//! follows a released lock and quits on q.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{lockward, KillOnDrop, Tmux};
use serde_json::Value;

/// An elected leader, a per-second cron job and a held lock on `url`.
fn busy_store(url: &str) -> Vec<KillOnDrop> {
    let spawn = |args: &[&str]| {
        KillOnDrop(
            Command::new(lockward())
                .args(["--store", url])
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    vec![
        spawn(&[
            "elect",
            "sched",
            "--identity",
            "node-a",
            "--",
            "sleep",
            "60",
        ]),
        spawn(&["cron", "tick", "* * * * * *", "--", "true"]),
        spawn(&["run", "orders/1", "--ttl", "30s", "--", "sleep", "60"]),
    ]
}

fn shows_everything(s: &Value) -> bool {
    let has = |list: &str, f: &dyn Fn(&Value) -> bool| {
        s[list].as_array().is_some_and(|rows| rows.iter().any(f))
    };
    has("locks", &|l| l["name"] == "orders/1" && l["fence"].is_u64())
        && has("elections", &|e| {
            e["name"] == "sched" && e["leader"] == "node-a"
        })
        && has("cron", &|c| {
            c["name"] == "tick"
                && c["expression"] == "* * * * * *"
                && c["last_outcome"] == "succeeded"
                && c["next_fire"].is_string()
        })
}

#[test]
fn json_watch_shows_locks_elections_and_cron_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let every = common::every_store(dir.path());
    for url in &every.urls {
        let _running = busy_store(url);
        let mut watch = KillOnDrop(
            Command::new(lockward())
                .args([
                    "--store",
                    url,
                    "status",
                    "--watch",
                    "--json",
                    "--interval",
                    "200ms",
                ])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut lines = BufReader::new(watch.0.stdout.take().unwrap()).lines();
        let until = Instant::now() + Duration::from_secs(30);
        let mut refreshes = 0;
        let mut last = Value::Null;
        while !shows_everything(&last) {
            assert!(
                Instant::now() < until,
                "{url}: after {refreshes} refreshes: {last}"
            );
            let line = lines.next().expect("a refresh").unwrap();
            last = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{url}: {e}: {line}"));
            refreshes += 1;
        }
        common::signal(watch.0.id(), libc::SIGTERM);
        let status = common::wait_exit(&mut watch.0, Duration::from_secs(5));
        assert_eq!(status.code(), Some(0), "{url}");
    }
}

#[test]
fn the_terminal_view_follows_the_store_and_quits_on_q() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("l.db").display());
    let mut running = busy_store(&url);
    let tmux = Tmux::new("watch");
    let view = format!(
        "{} --store {url} status --watch --interval 200ms; echo view exited $?; sleep 30",
        lockward()
    );
    tmux.start(&view);
    let screen = tmux.wait_for("shows the lock, the leader and a run", |s| {
        s.contains("orders/1") && s.contains("node-a") && s.contains("succeeded on")
    });
    assert!(screen.contains("q quits"), "{screen}");
    assert!(
        screen.contains("ELECTION") && screen.contains("CRON"),
        "{screen}"
    );

    // The holder ends: its row goes at the next refresh.
    let mut holder = running.pop().unwrap();
    common::signal(holder.0.id(), libc::SIGTERM);
    common::wait_exit(&mut holder.0, Duration::from_secs(5));
    tmux.wait_for("drops the released lock", |s| {
        !s.contains("orders/1") && s.contains("node-a")
    });

    tmux.keys("q");
    let screen = tmux.wait_for("quits on q", |s| s.contains("view exited"));
    assert!(screen.contains("view exited 0"), "{screen}");
    // Back on the normal screen: the view's tables are gone with it.
    assert!(!screen.contains("ELECTION"), "{screen}");
}

#[test]
fn a_too_short_interval_is_refused() {
    let out = Command::new(lockward())
        .args([
            "--store",
            "memory://",
            "status",
            "--watch",
            "--interval",
            "10ms",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
}

/// q ends the view at once even while the store does not answer (a paused
/// Redis): the keys are read while the store is.
#[cfg(feature = "redis")]
#[test]
fn q_quits_while_the_store_does_not_answer() {
    let redis = lockward_testkit::RedisServer::start();
    let tmux = Tmux::new("stalled");
    tmux.start(&format!(
        "{} --store {} status --watch --interval 200ms; echo view exited $?; sleep 30",
        lockward(),
        redis.url()
    ));
    tmux.wait_for("shows the view", |s| s.contains("q quits"));
    redis.pause();
    std::thread::sleep(Duration::from_millis(600));
    let asked = Instant::now();
    tmux.keys("q");
    let screen = tmux.wait_for("quits although the store hangs", |s| {
        s.contains("view exited")
    });
    let took = asked.elapsed();
    redis.resume();
    assert!(screen.contains("view exited 0"), "{screen}");
    // Reading the paused store gives up only after about 1.5 s.
    assert!(took < Duration::from_millis(800), "q took {took:?}");
}
