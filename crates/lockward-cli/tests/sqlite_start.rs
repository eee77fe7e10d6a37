//! Many instances starting at once on one fresh SQLite file (a cron line or
//! a rollout on every instance) all open the store: none fails with
//! "database is locked" while another creates the tables.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{lockward, wait_exit};

#[test]
fn fifty_processes_open_one_fresh_file_at_once() {
    const PROCESSES: usize = 50;
    const ROUNDS: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let url = format!(
            "sqlite://{}",
            dir.path().join(format!("fresh-{round}.db")).display()
        );
        let mut children: Vec<_> = (0..PROCESSES)
            .map(|_| {
                Command::new(lockward())
                    .args(["--store", &url, "run", "--no-wait", "start", "--", "true"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in &mut children {
            let status = wait_exit(child, Duration::from_secs(60));
            // 0: it ran; 75: another instance held the lock. Anything else
            // (69: the store could not be opened) is a failure.
            if !matches!(status.code(), Some(0) | Some(75)) {
                let mut err = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                failures.push(format!("round {round}: {status}: {err}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} starts failed:\n{}",
        failures.len(),
        PROCESSES * ROUNDS,
        failures.join("\n")
    );
}
