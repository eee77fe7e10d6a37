//! `--metrics`: three `lockward elect` candidates and two `lockward cron`
//! instances serve their metrics, a real Prometheus scrapes them, and its
//! query API shows one leader (another after the leader is killed) and as
//! many cron runs as the job's fire times.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{lockward, KillOnDrop};
use lockward_testkit::{free_port, PrometheusServer};

/// The instances (`host:port`) of an instant query's series whose value is
/// `value`.
fn instances_at(prometheus: &PrometheusServer, promql: &str, value: &str) -> Vec<String> {
    let answer: serde_json::Value =
        serde_json::from_str(&prometheus.query(promql)).unwrap_or_default();
    answer["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["value"][1] == value)
        .filter_map(|r| r["metric"]["instance"].as_str().map(str::to_string))
        .collect()
}

/// The value of a query that sums to one number, if it has one.
fn scalar(prometheus: &PrometheusServer, promql: &str) -> Option<f64> {
    let answer: serde_json::Value = serde_json::from_str(&prometheus.query(promql)).ok()?;
    answer["data"]["result"][0]["value"][1]
        .as_str()?
        .parse()
        .ok()
}

fn wait_until<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + within;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(
            Instant::now() < until,
            "{what} did not happen within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn prometheus_sees_one_leader_and_every_cron_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    let addrs: Vec<String> = (0..5)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    // `lockward --metrics ADDR ARGS…` on the shared store.
    let serving = |addr: &str, args: &[&str]| {
        KillOnDrop(
            Command::new(lockward())
                .args(["--store", &store, "--metrics", addr])
                .args(args)
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let mut candidates: Vec<KillOnDrop> = (0..3)
        .map(|i| {
            let identity = format!("c{i}");
            serving(
                &addrs[i],
                &[
                    "elect",
                    "reports",
                    "--identity",
                    &identity,
                    "--lease",
                    "2s",
                    "--renew-deadline",
                    "1400ms",
                    "--retry",
                    "300ms",
                    "--",
                    "sleep",
                    "1000",
                ],
            )
        })
        .collect();
    let ticks = dir.path().join("ticks");
    let ticks_path = ticks.to_str().unwrap();
    let _crons: Vec<KillOnDrop> = (3..5)
        .map(|i| {
            serving(
                &addrs[i],
                &[
                    "cron",
                    "tick",
                    "* * * * * *",
                    "--",
                    "sh",
                    "-c",
                    r#"echo "$LOCKWARD_FIRE_TIME" >> "$1""#,
                    "sh",
                    ticks_path,
                ],
            )
        })
        .collect();
    let prometheus = PrometheusServer::start(&addrs);

    // Exactly one of the three leads, and the other two say 0.
    let leader = wait_until("one leader in Prometheus", Duration::from_secs(20), || {
        let leading = instances_at(&prometheus, "lockward_leader", "1");
        let idle = instances_at(&prometheus, "lockward_leader", "0");
        (leading.len() == 1 && idle.len() == 2).then(|| leading[0].clone())
    });
    let index = addrs
        .iter()
        .position(|a| *a == leader)
        .expect("a candidate's address");
    let elected = scalar(
        &prometheus,
        r#"sum(lockward_elections_total{event="elected"})"#,
    );
    assert!(elected.is_some_and(|n| n >= 1.0), "{elected:?}");

    // kill -9 of the leader: another candidate leads, and says so.
    candidates[index].0.kill().unwrap();
    candidates[index].0.wait().unwrap();
    let next = wait_until(
        "a new leader in Prometheus",
        Duration::from_secs(20),
        || {
            let leading = instances_at(&prometheus, "lockward_leader", "1");
            (leading.len() == 1 && leading[0] != leader).then(|| leading[0].clone())
        },
    );
    assert_ne!(next, leader);

    // Every fire time ran once, on one of the two cron instances, and the
    // two counters sum to the runs.
    wait_until("cron runs counted", Duration::from_secs(20), || {
        let ran = std::fs::read_to_string(&ticks).unwrap_or_default();
        let fires: Vec<&str> = ran.lines().collect();
        let mut unique = fires.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            fires.len(),
            "a fire time ran twice: {fires:?}"
        );
        let counted = scalar(
            &prometheus,
            r#"sum(lockward_cron_runs_total{cron="tick",outcome="ok"})"#,
        );
        let counted = counted?;
        (fires.len() >= 3 && counted == fires.len() as f64).then_some(())
    });
    // Acquisitions are counted by outcome and store.
    let granted = scalar(
        &prometheus,
        r#"sum(lockward_acquisitions_total{store="sqlite",outcome="granted"})"#,
    );
    assert!(granted.is_some_and(|n| n >= 3.0), "{granted:?}");
}

#[test]
fn a_bad_or_taken_metrics_address_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    let run_serving_on = |addr: &str| {
        Command::new(lockward())
            .args([
                "--store",
                &store,
                "--metrics",
                addr,
                "run",
                "x",
                "--",
                "true",
            ])
            .output()
            .unwrap()
    };
    let bad = run_serving_on("nowhere");
    assert_eq!(bad.status.code(), Some(64), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not an address"));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = run_serving_on(&taken.local_addr().unwrap().to_string());
    assert_eq!(busy.status.code(), Some(69), "{busy:?}");
    assert!(String::from_utf8_lossy(&busy.stderr).contains("cannot serve metrics"));
}
