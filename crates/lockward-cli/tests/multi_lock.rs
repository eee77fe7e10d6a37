//! `lockward run a b -- CMD` takes every name, all or nothing: two loops
//! naming the same locks in opposite orders never deadlock and never
//! overlap, CMD sees each name's fence, and a held name fails the whole run.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{every_store, lockward, wait_for_file};

/// CMD: fails if another holder is inside, counts one run.
const CRITICAL: &str = r#"mkdir "$1/inside" || { echo overlap >> "$1/bad"; exit 1; }; n=$(cat "$1/count" 2>/dev/null || echo 0); echo $((n + 1)) > "$1/count"; rmdir "$1/inside""#;

/// The store's address for messages, password redacted.
fn shown(url: &str) -> String {
    lockward::StoreUrl::parse(url).map_or_else(|_| "?".into(), |u| u.to_string())
}

/// Two loops, `a b c` and `c b a`, for `run_for`; the runs each made.
fn opposite_orders(url: &str, dir: &Path, run_for: Duration) -> [u32; 2] {
    let store = shown(url);
    let prefix = format!("multi-{}", std::process::id());
    let names: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| format!("{prefix}/{n}"))
        .collect();
    let until = Instant::now() + run_for;
    let loops = [false, true].map(|reversed| {
        let mut order = names.clone();
        if reversed {
            order.reverse();
        }
        let (url, store, dir) = (url.to_string(), store.clone(), dir.to_path_buf());
        std::thread::spawn(move || {
            let mut runs = 0;
            while Instant::now() < until {
                let out = Command::new(lockward())
                    .args(["--store", &url, "run"])
                    .args(&order)
                    .args(["--ttl", "10s", "--wait", "15s"])
                    .args(["--", "sh", "-c", CRITICAL, "sh"])
                    .arg(&dir)
                    .stderr(Stdio::piped())
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{store} {order:?}: {} (a deadlock shows as 75)",
                    String::from_utf8_lossy(&out.stderr)
                );
                runs += 1;
            }
            runs
        })
    });
    let runs = loops.map(|l| l.join().expect("a loop failed"));
    assert!(
        !dir.join("bad").exists(),
        "{store}: two holders were inside at once"
    );
    let count: u32 = wait_for_file(&dir.join("count"), Duration::from_secs(1))
        .parse()
        .unwrap();
    assert_eq!(count, runs[0] + runs[1], "{store}: lost updates");
    assert!(
        runs.iter().all(|r| *r > 0),
        "{store}: a loop never got in: {runs:?}"
    );
    runs
}

#[test]
fn opposite_orders_for_30_s_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    let runs = opposite_orders(&store, dir.path(), Duration::from_secs(30));
    eprintln!("sqlite: {runs:?} runs in 30 s, no deadlock, no overlap");
}

#[test]
fn opposite_orders_on_every_server_store() {
    let dir = tempfile::tempdir().unwrap();
    let every = every_store(dir.path());
    let threads: Vec<_> = every
        .urls
        .iter()
        .filter(|u| !u.starts_with("sqlite:"))
        .enumerate()
        .map(|(i, url)| {
            let (url, sub) = (url.clone(), dir.path().join(i.to_string()));
            std::fs::create_dir(&sub).unwrap();
            std::thread::spawn(move || {
                let runs = opposite_orders(&url, &sub, Duration::from_secs(4));
                eprintln!("{}: {runs:?} runs in 4 s", shown(&url));
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a store failed");
    }
}

#[test]
fn every_name_gets_its_fence_and_a_held_one_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = format!("sqlite://{}", d.join("l.db").display());
    let run = |names: &[&str], script: &str| {
        Command::new(lockward())
            .args(["--store", &store, "run"])
            .args(names)
            .args(["--no-wait", "--", "sh", "-c", script, "sh"])
            .arg(d)
            .output()
            .unwrap()
    };
    // Raise b's fence first, so the fences differ by name.
    assert!(run(&["b"], "true").status.success());
    assert!(run(&["b"], "true").status.success());
    let out = run(
        &["b", "a"],
        r#"echo "$LOCKWARD_NAME_1=$LOCKWARD_FENCE_1 $LOCKWARD_NAME_2=$LOCKWARD_FENCE_2 $LOCKWARD_NAME=$LOCKWARD_FENCE" > "$1/env""#,
    );
    assert!(out.status.success(), "{out:?}");
    let env = wait_for_file(&d.join("env"), Duration::from_secs(1));
    let fences: Vec<(String, u64)> = env
        .split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    assert_eq!(fences[0].0, "b", "{env}");
    assert_eq!(fences[1].0, "a", "{env}");
    assert_eq!(
        fences[2], fences[0],
        "LOCKWARD_NAME is the first given: {env}"
    );
    assert!(fences[0].1 > fences[1].1, "b was taken twice before: {env}");

    // a held elsewhere: the run fails with 75 and leaves b free.
    let mut holder = Command::new(lockward())
        .args(["--store", &store, "run", "a", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    let held = Instant::now();
    loop {
        let out = run(&["a"], "true");
        if out.status.code() == Some(75) {
            break;
        }
        assert!(held.elapsed() < Duration::from_secs(10), "a never held");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run(&["b", "a"], "true");
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(run(&["b"], "true").status.success(), "b was left taken");
    let dup = run(&["b", "b"], "true");
    assert_eq!(dup.status.code(), Some(64), "{dup:?}");
    holder.kill().unwrap();
    holder.wait().unwrap();
}
