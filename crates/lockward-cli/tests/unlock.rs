//! `lockward unlock NAME --force` on every store: a `run` whose lock is
//! forcibly unlocked stops its command and exits 76 saying why, the next
//! holder's fence is larger, and it asks first unless told `--yes`.

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
        let advisory = url.contains("mode=advisory");
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
        let status = common::wait_exit(&mut holder.0, Duration::from_secs(8));
        assert_eq!(status.code(), Some(76), "{url}");
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut holder.0.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(stderr.contains("forced unlock"), "{url}: {stderr}");

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
    }
}
