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
        .args(["sh", "-c", &second_sees_the_tree(), "sh"])
        .arg(d)
        .args([child.to_string(), daemon.to_string()])
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
    // What the second instance's command saw when it started, rather than
    // when this test's polling noticed the tree gone (polling can be late).
    let running = std::fs::read_to_string(d.join("running")).unwrap_or_default();
    assert!(
        running.trim().is_empty(),
        "the second instance started while the tree still ran: {running}"
    );
    assert!(second_at > stopped_ns);
    assert!(second_at <= gone_ns + 1_000_000_000);
    signal(first.0.id(), libc::SIGCONT);
    let status = common::wait_exit(&mut first.0, Duration::from_secs(10));
    assert_eq!(
        status.code(),
        Some(76),
        "the resumed lockward reports the loss"
    );
}

/// CMD of the second instance: its start time in `DIR/second`, and in
/// `DIR/running` every pid given after DIR that still runs.
fn second_sees_the_tree() -> String {
    format!(
        r#"date +%s%N > "$1/second"; d=$1; shift; for p in "$@"; do if {RUNS}; then echo "$p" >> "$d/running"; fi; done"#
    )
}

/// Shell: whether process `$p` still runs (exists and is not a zombie:
/// `kill -0` also succeeds on a killed process its parent has not reaped).
const RUNS: &str = r#"[ -r "/proc/$p/stat" ] && ! grep -q ') Z' "/proc/$p/stat""#;

/// CMD for the keeper tests: a foreground child in its group, a background
/// child and a `setsid` grandchild; every pid (CMD's too) in `DIR/NAME`.
/// Runs once per folder (a cron job fires again every second).
const FULL_TREE: &str = r#"[ -e "$1/cmd" ] && exit 0; echo $$ > "$1/cmd"; sleep 300 & echo $! > "$1/bg"; setsid sleep 301 & echo $! > "$1/daemon"; sh -c 'echo $$ > "$1/fg.tmp"; mv "$1/fg.tmp" "$1/fg"; exec sleep 302' sh "$1"; wait"#;

/// The pids of a [`FULL_TREE`]: CMD, foreground, background, daemon.
fn full_tree_pids(dir: &Path) -> [u32; 4] {
    ["cmd", "fg", "bg", "daemon"].map(|f| {
        wait_for_file(&dir.join(f), Duration::from_secs(20))
            .parse()
            .unwrap()
    })
}

/// The keeper of lockward `pid` (its child running `lockward keeper`).
fn keeper_of(pid: u32) -> u32 {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|s| s.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            if ppid == Some(pid) && cmdline.starts_with(b"lockward\0keeper\0") {
                return p;
            }
        }
        assert!(Instant::now() < until, "lockward {pid} has no keeper");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A cgroup v2 directory of the test's own, for lockward to put its
/// commands' cgroups in; removed (it must be empty by then) on drop.
struct TestCgroup(std::path::PathBuf);

impl TestCgroup {
    /// One under this process's own cgroup, or why the machine does not
    /// allow it.
    fn make() -> Result<TestCgroup, String> {
        let dir = common::own_cgroup_dir()?.join(format!(
            "lockward-test-{}-{}",
            std::process::id(),
            now_ns()
        ));
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(TestCgroup(dir))
    }

    /// Fails unless every cgroup lockward made in it is gone within 5 s
    /// (the warden removes them once the keeper is gone).
    fn assert_cleaned_up(&self, what: &str) {
        let until = Instant::now() + Duration::from_secs(5);
        while !self.leftovers().is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            self.leftovers().is_empty(),
            "{what}: cgroups left: {:?}",
            self.leftovers()
        );
    }

    /// The cgroups lockward left in it.
    fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// How a test bounds CMD's tree: the subreapers only, or with a cgroup.
fn layers(cgroup: Option<&TestCgroup>) -> (&'static str, String) {
    match cgroup {
        Some(c) => ("LOCKWARD_CGROUP", c.0.display().to_string()),
        None => ("LOCKWARD_CGROUP", "off".into()),
    }
}

#[test]
fn sigkill_of_the_keeper_ends_the_whole_tree_before_the_lock_passes() {
    let cgroup = match TestCgroup::make() {
        Ok(c) => Some(c),
        Err(why) => {
            eprintln!("no writable cgroup v2 here ({why}): testing the subreaper layer only");
            None
        }
    };
    let mut variants = vec![None];
    variants.extend(cgroup.as_ref().map(Some));
    let mut every_tree = Vec::new();
    for cgroup in variants {
        let (var, value) = layers(cgroup);
        for command in [
            vec!["run", "kk", "--ttl", "3s"],
            vec!["sem", "kk", "-n", "1", "--ttl", "3s"],
            vec!["once", "kk", "--ttl", "3s"],
            vec![
                "elect",
                "kk",
                "--lease",
                "3s",
                "--renew-deadline",
                "2s",
                "--retry",
                "200ms",
            ],
            vec!["cron", "kk", "* * * * * *", "--lock-at-most", "3s"],
        ] {
            let what = format!("{command:?} with {var}={value}");
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let url = format!("sqlite://{}", d.join("l.db").display());
            let first = KillOnDrop(
                Command::new(lockward())
                    .args(["--store", &url])
                    .args(&command)
                    .args(["--", "sh", "-c", FULL_TREE, "sh"])
                    .arg(d)
                    .env(var, &value)
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
            let tree = full_tree_pids(d);
            assert!(
                tree.iter().all(|p| alive(*p)),
                "{what}: the tree did not start"
            );
            // The next holder's command records which of the old tree's
            // processes still run when it starts.
            let second = (command[0] != "cron").then(|| {
                let pids = tree.map(|p| p.to_string()).join(" ");
                let script = format!(
                    r#"for p in {pids}; do {RUNS} && echo $p; done > "$1/alive.tmp"; echo checked >> "$1/alive.tmp"; mv "$1/alive.tmp" "$1/alive_at_second""#
                );
                let mut args: Vec<&str> = command.clone();
                if matches!(args[0], "run" | "sem" | "once") {
                    args.extend(["--wait", "20s"]);
                }
                if args[0] == "elect" {
                    args.extend(["--identity", "second"]);
                }
                KillOnDrop(
                    Command::new(lockward())
                        .args(["--store", &url])
                        .args(&args)
                        .args(["--", "sh", "-c", &script, "sh"])
                        .arg(d)
                        .env(var, &value)
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap(),
                )
            });
            std::thread::sleep(Duration::from_millis(300));
            let keeper = keeper_of(first.0.id());
            signal(keeper, libc::SIGKILL);
            let killed = Instant::now();
            for pid in tree {
                assert!(
                    wait_gone(pid, Duration::from_secs(1)),
                    "{what}: {pid} outlived the keeper by 1 s (the lease is 3 s)"
                );
            }
            eprintln!(
                "{what}: tree gone {:?} after SIGKILL of the keeper",
                killed.elapsed()
            );
            if second.is_some() {
                let alive = wait_for_file(&d.join("alive_at_second"), Duration::from_secs(20));
                assert!(
                    alive == "checked",
                    "{what}: {alive} ran on when the next holder started"
                );
            }
            let mut first = first;
            // cron goes on to the next fire time; the others end.
            if command[0] == "cron" {
                std::thread::sleep(Duration::from_millis(500));
                signal(first.0.id(), libc::SIGTERM);
            }
            let status = common::wait_exit(&mut first.0, Duration::from_secs(10));
            let mut stderr = String::new();
            std::io::Read::read_to_string(first.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            if command[0] != "cron" {
                assert_eq!(status.code(), Some(70), "{what}: {stderr}");
            }
            assert!(
                stderr.contains("the command's keeper was killed by signal 9"),
                "{what}: lockward did not say what happened: {stderr}"
            );
            drop(first);
            if let Some(mut second) = second {
                let status = common::wait_exit(&mut second.0, Duration::from_secs(10));
                assert!(status.success(), "{what}: the next holder: {status}");
            }
            if let Some(c) = cgroup {
                c.assert_cleaned_up(&what);
            }
            every_tree.extend(tree.map(|p| (what.clone(), p)));
        }
    }
    std::thread::sleep(Duration::from_secs(5));
    for (what, pid) in every_tree {
        assert!(!alive(pid), "{what}: {pid} is still running 5 s later");
    }
}

/// lockward and its keeper killed at the same moment: with a cgroup the
/// warden ends the whole tree; without one, as docs/cli.md says, CMD dies
/// with the keeper and what it started may run on.
#[test]
fn sigkill_of_lockward_and_the_keeper_together() {
    let cgroup = TestCgroup::make();
    if let Err(why) = &cgroup {
        eprintln!("no writable cgroup v2 here ({why}): testing the case without one only");
    }
    let mut variants = vec![None];
    variants.extend(cgroup.as_ref().ok().map(Some));
    for cgroup in variants {
        let (var, value) = layers(cgroup);
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let url = format!("sqlite://{}", d.join("l.db").display());
        let lockward = KillOnDrop(
            Command::new(lockward())
                .args(["--store", &url, "run", "both", "--ttl", "3s"])
                .args(["--", "sh", "-c", FULL_TREE, "sh"])
                .arg(d)
                .env(var, &value)
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let [cmd, fg, bg, daemon] = full_tree_pids(d);
        let keeper = keeper_of(lockward.0.id());
        signal(lockward.0.id(), libc::SIGKILL);
        signal(keeper, libc::SIGKILL);
        let killed = Instant::now();
        assert!(
            wait_gone(cmd, Duration::from_secs(1)),
            "{var}={value}: CMD outlived its keeper"
        );
        if let Some(c) = cgroup {
            for pid in [fg, bg, daemon] {
                assert!(
                    wait_gone(pid, Duration::from_secs(1)),
                    "{var}={value}: {pid} outlived lockward and the keeper"
                );
            }
            eprintln!(
                "with a cgroup: tree gone {:?} after both were killed",
                killed.elapsed()
            );
            std::thread::sleep(Duration::from_secs(5));
            for pid in [cmd, fg, bg, daemon] {
                assert!(!alive(pid), "{pid} is running 5 s later");
            }
            let until = Instant::now() + Duration::from_secs(5);
            while !c.leftovers().is_empty() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(
                c.leftovers().is_empty(),
                "cgroups left: {:?}",
                c.leftovers()
            );
        } else {
            // What docs/cli.md says may survive: what CMD started.
            std::thread::sleep(Duration::from_secs(1));
            let survivors: Vec<u32> = [fg, bg, daemon].into_iter().filter(|p| alive(*p)).collect();
            for pid in &survivors {
                signal(*pid, libc::SIGKILL);
            }
            // The daemon left CMD's process group and its parent, so nothing
            // but a cgroup reaches it. The others survive too when both die
            // before the keeper acts; on a busy machine the keeper may see
            // lockward die first and end some or all of CMD's tree before
            // its own SIGKILL lands (seen: fg ended, bg not yet).
            assert!(
                survivors.contains(&daemon),
                "without a cgroup, the daemon CMD started survives lockward and the keeper \
                 killed together: survivors {survivors:?} of {:?}",
                [fg, bg, daemon]
            );
        }
    }
}
