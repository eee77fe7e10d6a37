//! `lockward run` and `lockward status` on `zk://`.
#![cfg(feature = "zookeeper")]

mod common;

use common::check_run_and_status;
use lockward_testkit::ZookeeperEnsemble;

#[test]
fn run_and_status_on_zookeeper() {
    let zk = ZookeeperEnsemble::start_single();
    check_run_and_status(&zk.url(), "deploy", |_| {
        // The server counts lockward's contender node among its ephemerals.
        let ephemerals = zk.four_letter(0, "dump");
        assert!(ephemerals.contains("/lockward/deploy/_c_"), "{ephemerals}");
    });
}

/// With no `--ttl`, `run` uses a TTL the server's sessions allow: a server
/// capped at 10 s sessions (below the 30 s default) still runs the command.
#[test]
fn default_ttl_fits_a_server_capped_at_ten_second_sessions() {
    let zk = ZookeeperEnsemble::start_single_capped(std::time::Duration::from_secs(10));
    for args in [
        vec!["run", "capped", "--", "true"],
        vec!["sem", "capped-sem", "-n", "2", "--", "true"],
        vec!["once", "capped-once", "--", "true"],
        vec!["elect", "capped-elect", "--", "true"],
    ] {
        let out = std::process::Command::new(common::lockward())
            .args(["--store", &zk.url()])
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // An explicit TTL above the session is still refused, clearly.
    let out = std::process::Command::new(common::lockward())
        .args([
            "--store",
            &zk.url(),
            "run",
            "--ttl",
            "30s",
            "capped",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("session"));
}

/// `cron` on a server capped at 10 s sessions: its locks are renewed, so a
/// 12-second job runs to its end within the default `--lock-at-most`, and
/// the fire times that came meanwhile are recorded missed.
#[test]
fn cron_runs_a_job_longer_than_the_session() {
    let zk = ZookeeperEnsemble::start_single_capped(std::time::Duration::from_secs(10));
    let url = zk.url();
    let mut cron = common::KillOnDrop(
        std::process::Command::new(common::lockward())
            .args([
                "--store",
                &url,
                "cron",
                "long",
                "* * * * * *",
                "--",
                "sleep",
                "12",
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Beside it, a job that outlasts its own --lock-at-most: stopped then,
    // although its locks are renewed.
    let mut capped = common::KillOnDrop(
        std::process::Command::new(common::lockward())
            .args(["--store", &url, "cron", "capped", "* * * * * *"])
            .args(["--lock-at-most", "11s", "--", "sleep", "60"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_millis(14_500));
    common::signal(capped.0.id(), libc::SIGTERM);
    common::signal(cron.0.id(), libc::SIGTERM);
    common::wait_exit(&mut capped.0, std::time::Duration::from_secs(20));
    let capped_log = std::process::Command::new(common::lockward())
        .args(["--store", &url, "cron-log", "capped", "--json"])
        .output()
        .unwrap();
    let capped_rows: serde_json::Value = serde_json::from_slice(&capped_log.stdout).unwrap();
    let stopped = capped_rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["outcome"] == "failed: stopped: lock_at_most_for passed")
        .unwrap_or_else(|| panic!("not stopped at --lock-at-most: {capped_rows:#?}"));
    let at = |field: &str| {
        chrono::DateTime::parse_from_rfc3339(stopped[field].as_str().unwrap()).unwrap()
    };
    let ran_for = (at("end") - at("start")).num_milliseconds();
    // SIGTERM a grace period (a quarter of the 10 s TTL) before the 11 s.
    assert!(
        (7_500..12_500).contains(&ran_for),
        "ran {ran_for} ms: {stopped}"
    );
    common::wait_exit(&mut cron.0, std::time::Duration::from_secs(20));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut cron.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!stderr.contains("invalid ttl"), "{stderr}");
    let log = std::process::Command::new(common::lockward())
        .args(["--store", &url, "cron-log", "long", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&log.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let ran = rows
        .iter()
        .find(|r| r["outcome"] == "succeeded")
        .unwrap_or_else(|| panic!("the 12 s job never succeeded: {rows:#?}\n{stderr}"));
    let at =
        |field: &str| chrono::DateTime::parse_from_rfc3339(ran[field].as_str().unwrap()).unwrap();
    assert!((at("end") - at("start")).num_seconds() >= 12, "{ran}");
    // This one instance was busy meanwhile: those fire times were missed.
    assert!(
        rows.iter().any(|r| r["missed"] == true),
        "no fire time missed while it ran: {rows:#?}"
    );
}
