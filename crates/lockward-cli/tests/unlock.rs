//! `lockward unlock NAME --force` on every store: a `run` whose lock is
//! forcibly unlocked stops its command and exits 76 saying why, the next
//! holder's fence is larger, and it asks first unless told `--yes`; so does
//! a `sem` holder ended by its row in `status`.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{lockward, KillOnDrop};

fn unlock(url: &str, args: &[&str]) -> std::process::Output {
    Command::new(lockward())
        .args(["--store", url, "unlock"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_forced_unlock_stops_the_holders_command_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let every = common::every_store(dir.path());
    for url in &every.urls {
        let advisory = common::session_locks(url);
        let mut holder = KillOnDrop(
            Command::new(lockward())
                .args(["--store", url, "run", "stuck-job", "--ttl", "6s", "--"])
                .args(["sh", "-c", "echo $LOCKWARD_FENCE; exec sleep 60"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut out = BufReader::new(holder.0.stdout.take().unwrap());
        let mut fence = String::new();
        out.read_line(&mut fence).unwrap();
        let fence: u64 = fence.trim().parse().unwrap();

        // Not without --force, and not without --yes off a terminal.
        assert_eq!(unlock(url, &["stuck-job"]).status.code(), Some(64), "{url}");
        let asked = unlock(url, &["stuck-job", "--force"]);
        assert_eq!(asked.status.code(), Some(64), "{url}: {asked:?}");
        assert!(
            String::from_utf8_lossy(&asked.stderr).contains("--yes"),
            "{url}"
        );

        let forced = unlock(url, &["stuck-job", "--force", "--yes"]);
        if advisory {
            assert_eq!(forced.status.code(), Some(64), "{url}: {forced:?}");
            let says = String::from_utf8_lossy(&forced.stderr);
            assert!(
                says.contains("forced unlock") && says.contains("session"),
                "{says}"
            );
            continue;
        }
        assert!(forced.status.success(), "{url}: {forced:?}");
        stopped_by_the_unlock(&mut holder, url);

        let next = Command::new(lockward())
            .args(["--store", url, "run", "stuck-job", "--no-wait", "--"])
            .args(["sh", "-c", "echo $LOCKWARD_FENCE"])
            .output()
            .unwrap();
        assert!(next.status.success(), "{url}: {next:?}");
        let next: u64 = String::from_utf8_lossy(&next.stdout)
            .trim()
            .parse()
            .unwrap();
        assert!(next > fence, "{url}: {next} after {fence}");

        let free = unlock(url, &["stuck-job", "--force", "--yes"]);
        assert!(free.status.success(), "{url}: {free:?}");
        assert!(
            String::from_utf8_lossy(&free.stdout).contains("not held"),
            "{url}"
        );
        ends_a_semaphore_holder(url);
    }
}

/// `lockward sem` holding one of two permits, ended by its row in
/// `status`: its command stops with 76, the permit is free again.
fn ends_a_semaphore_holder(url: &str) {
    let mut holder = KillOnDrop(
        Command::new(lockward())
            .args([
                "--store",
                url,
                "sem",
                "stuck-pool",
                "-n",
                "2",
                "--ttl",
                "6s",
            ])
            .args(["--", "sh", "-c", "echo up; exec sleep 60"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut up = String::new();
    BufReader::new(holder.0.stdout.take().unwrap())
        .read_line(&mut up)
        .unwrap();
    assert_eq!(up.trim(), "up", "{url}");
    let out = Command::new(lockward())
        .args(["--store", url, "status", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .find(|n| n.starts_with("stuck-pool#permit/"))
        .unwrap_or_else(|| panic!("{url}: no holder row in {rows}"))
        .to_string();
    let forced = unlock(url, &[&row, "--force", "--yes"]);
    assert!(forced.status.success(), "{url}: {forced:?}");
    stopped_by_the_unlock(&mut holder, url);
}

/// The holder's command was stopped: exit 76, saying why.
fn stopped_by_the_unlock(holder: &mut KillOnDrop, url: &str) {
    let status = common::wait_exit(&mut holder.0, Duration::from_secs(8));
    assert_eq!(status.code(), Some(76), "{url}");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut holder.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("forced unlock"), "{url}: {stderr}");
}

/// On a terminal, unlock says who holds the lock and asks: no leaves it
/// held (exit 1), yes ends it.
#[test]
fn on_a_terminal_it_asks_first() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("l.db").display());
    let mut holder = KillOnDrop(
        Command::new(lockward())
            .args([
                "--store", &url, "run", "report", "--ttl", "6s", "--", "sleep", "60",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let held = || {
        let out = Command::new(lockward())
            .args(["--store", &url, "status", "--json"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("\"report\"")
    };
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !held() {
        assert!(std::time::Instant::now() < until, "never held");
        std::thread::sleep(Duration::from_millis(50));
    }
    let ask = format!(
        "{} --store {url} unlock report --force; echo unlock exited $?; sleep 30",
        lockward()
    );

    let tmux = common::Tmux::new("unlock");
    tmux.start(&ask);
    let screen = tmux.wait_for("asks", |s| s.contains("[y/N]"));
    assert!(
        screen.contains("report is held by") && screen.contains("fence"),
        "{screen}"
    );
    tmux.keys("n");
    tmux.keys("Enter");
    let screen = tmux.wait_for("exits", |s| s.contains("unlock exited"));
    assert!(
        screen.contains("left report as it was") && screen.contains("unlock exited 1"),
        "{screen}"
    );
    assert!(held(), "a no still ended the lease");
    drop(tmux);

    let tmux = common::Tmux::new("unlock");
    tmux.start(&ask);
    tmux.wait_for("asks", |s| s.contains("[y/N]"));
    tmux.keys("y");
    tmux.keys("Enter");
    let screen = tmux.wait_for("exits", |s| s.contains("unlock exited"));
    assert!(screen.contains("unlock exited 0"), "{screen}");
    let status = common::wait_exit(&mut holder.0, Duration::from_secs(8));
    assert_eq!(status.code(), Some(76));
}
