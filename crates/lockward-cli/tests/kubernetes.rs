//! `lockward` on `k8s://` against a real kube-apiserver: `run` and `status`
//! as kubectl sees them; client-go's `LeaderElector` and `lockward elect`
//! on one Lease, in both orders, through a `kill -9` of the leader; exact
//! counters with growing fences, also across `kubectl delete lease`; and
//! waiters that ride out a killed API server.
#![cfg(feature = "kubernetes")]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{check_run_and_status, lockward, KillOnDrop};
use lockward_testkit::KubeApiServer;

/// client-go's timing for the interoperability test (lease duration, renew
/// deadline, retry period), shortened from 15 s / 10 s / 2 s.
const TIMING: [Duration; 3] = [
    Duration::from_secs(3),
    Duration::from_secs(2),
    Duration::from_millis(500),
];

/// One test at a time: each starts its own API server, and the timing
/// checks should not share two cores with several of them.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A `lockward run NAME` whose command prints its fence: (exit code, fence).
fn run_once(url: &str, name: &str) -> (Option<i32>, Option<u64>) {
    let out = Command::new(lockward())
        .args(["--store", url, "run", name, "--ttl", "10s", "--"])
        .args(["sh", "-c", r#"echo "$LOCKWARD_FENCE""#])
        .output()
        .unwrap();
    let fence = String::from_utf8_lossy(&out.stdout).trim().parse().ok();
    (out.status.code(), fence)
}

fn lease_field(server: &KubeApiServer, lease: &str, path: &str) -> String {
    let out = server.kubectl(&["get", "lease", lease, "-o", &format!("jsonpath={{{path}}}")]);
    assert!(out.status.success(), "kubectl get lease {lease}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn run_and_status_on_kubernetes() {
    let _turn = one_at_a_time();
    let server = KubeApiServer::start();
    check_run_and_status(&server.url(), "deploy/web", |fence| {
        // kubectl sees the holder on the Lease the name maps to, and the
        // fence lockward wrote beside it.
        let holder = lease_field(&server, "lockward-deploy--2fweb", ".spec.holderIdentity");
        assert!(holder.contains('_'), "holder {holder:?}");
        let annotated = lease_field(
            &server,
            "lockward-deploy--2fweb",
            ".metadata.annotations.lockward\\.dev/fence",
        );
        assert_eq!(annotated, fence.to_string());
    });
    // Released as client-go releases: no holder, a duration of 1 s.
    let (code, _) = run_once(&server.url(), "deploy/web");
    assert_eq!(code, Some(0));
    assert_eq!(
        lease_field(&server, "lockward-deploy--2fweb", ".spec.holderIdentity"),
        ""
    );
    assert_eq!(
        lease_field(
            &server,
            "lockward-deploy--2fweb",
            ".spec.leaseDurationSeconds"
        ),
        "1"
    );
}

#[test]
fn doctor_names_the_verbs_an_identity_lacks() {
    let _turn = one_at_a_time();
    let server = KubeApiServer::start();
    let url = format!(
        "k8s://default?kubeconfig={}",
        server.nobody_kubeconfig().display()
    );
    let out = Command::new(lockward())
        .args(["--store", &url, "doctor"])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let access = report
        .lines()
        .find(|l| l.contains("access"))
        .unwrap_or_default();
    assert!(access.starts_with("error"), "{report}");
    for verb in ["watch leases", "update leases", "delete configmaps"] {
        assert!(access.contains(verb), "{verb} not named: {access}");
    }
    assert!(report.contains("Role"), "no advice: {report}");
    // And a lock says what is wrong, without the token.
    let run = Command::new(lockward())
        .args(["--store", &url, "run", "x", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(77));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("forbidden") && err.contains("nobody"), "{err}");
    assert!(!err.contains("token"), "{err}");
}

/// Waits until the API server's authorizer lets `user` do `verb` on
/// `resource` (a new RoleBinding takes a moment to apply).
fn wait_until_allowed(server: &KubeApiServer, user: &str, verb: &str, resource: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let out = server.kubectl(&["auth", "can-i", verb, resource, "--as", user]);
        if String::from_utf8_lossy(&out.stdout).trim() == "yes" {
            return;
        }
        assert!(
            Instant::now() < until,
            "{user} may still not {verb} {resource}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_missing_verb_or_a_rejected_token_fails_at_once_and_says_which() {
    let _turn = one_at_a_time();
    let server = KubeApiServer::start();
    // The Leases exist, as they do once anyone has held the lock.
    assert_eq!(run_once(&server.url(), "jobs").0, Some(0));
    assert_eq!(run_once(&server.url(), "scheduler").0, Some(0));
    // nobody may do everything with Leases but update them.
    for args in [
        &[
            "create",
            "role",
            "no-update",
            "--verb=get,list,watch,create",
            "--resource=leases",
        ][..],
        &[
            "create",
            "rolebinding",
            "no-update",
            "--role=no-update",
            "--user=nobody",
        ][..],
    ] {
        let out = server.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?}: {out:?}");
    }
    wait_until_allowed(&server, "nobody", "watch", "leases");
    let nobody = format!(
        "k8s://default?kubeconfig={}",
        server.nobody_kubeconfig().display()
    );
    let refused = |url: &str, args: &[&str]| {
        let began = Instant::now();
        let out = Command::new(lockward())
            .args(["--store", url])
            .args(args)
            .output()
            .unwrap();
        let took = began.elapsed();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(77), "{args:?}: {err}");
        assert!(
            took < Duration::from_secs(2),
            "{args:?} took {took:?}: {err}"
        );
        err
    };
    for args in [
        &["run", "jobs", "--", "true"][..],
        &["elect", "scheduler", "--identity", "node-a", "--", "true"][..],
    ] {
        let err = refused(&nobody, args);
        assert!(
            err.contains("may not update leases in namespace default"),
            "{args:?}: {err}"
        );
    }
    // A token the API server does not know (expired, revoked).
    let config = std::fs::read_to_string(server.nobody_kubeconfig()).unwrap();
    let token = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap()
        .to_string();
    let stale = "expired-token-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("expired.kubeconfig");
    std::fs::write(&path, config.replace(&token, stale)).unwrap();
    let expired = format!("k8s://default?kubeconfig={}", path.display());
    for args in [
        &["run", "jobs", "--", "true"][..],
        &["elect", "scheduler", "--identity", "node-a", "--", "true"][..],
    ] {
        let err = refused(&expired, args);
        assert!(err.contains("credentials"), "{args:?}: {err}");
        assert!(!err.contains(stale) && !err.contains(&token), "{err}");
    }
}

/// A read–sleep–write of a counter file that loses updates unless runs
/// are serialised; each run appends its fence.
const CRITICAL_SECTION: &str = r#"
n=$(cat "$1/counter")
sleep 0.002
echo $((n + 1)) > "$1/counter"
echo "$LOCKWARD_FENCE" >> "$1/fences"
"#;

fn fences(dir: &Path) -> Vec<u64> {
    std::fs::read_to_string(dir.join("fences"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().expect("a fence is a number"))
        .collect()
}

/// One `lockward run`: when it started and ended, and its exit code.
type Span = (Instant, Instant, Option<i32>);

/// Runs `workers` × `runs` increments; a run that could not reach the API
/// server (exit 69, before its command ran) is tried again. Returns every
/// run's span.
fn increments(url: &str, dir: &Path, workers: usize, runs: usize, wait: &str) -> Vec<Span> {
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let (url, dir, wait) = (url.to_string(), dir.to_path_buf(), wait.to_string());
            std::thread::spawn(move || {
                let mut spans = Vec::new();
                let mut done = 0;
                while done < runs {
                    let began = Instant::now();
                    let out = Command::new(lockward())
                        .args([
                            "--store", &url, "run", "counter", "--ttl", "30s", "--wait", &wait,
                            "--",
                        ])
                        .args(["sh", "-c", CRITICAL_SECTION, "sh"])
                        .arg(&dir)
                        .output()
                        .expect("start lockward");
                    spans.push((began, Instant::now(), out.status.code()));
                    match out.status.code() {
                        Some(0) => done += 1,
                        Some(69) => std::thread::sleep(Duration::from_millis(200)),
                        _ => panic!(
                            "lockward run failed: {}",
                            String::from_utf8_lossy(&out.stderr)
                        ),
                    }
                }
                spans
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().expect("worker"))
        .collect()
}

#[test]
fn counter_is_exact_and_fences_grow_across_a_deleted_lease() {
    let _turn = one_at_a_time();
    let server = KubeApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("counter"), "0\n").unwrap();
    increments(&server.url(), dir.path(), 6, 20, "60s");
    let counter = std::fs::read_to_string(dir.path().join("counter")).unwrap();
    assert_eq!(counter.trim(), "120", "lost updates");
    let seen = fences(dir.path());
    assert_eq!(seen.len(), 120);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "fences not increasing: {seen:?}"
    );

    // Someone deletes the Lease: the next holder's fence is still larger.
    let deleted = server.kubectl(&["delete", "lease", "lockward-counter"]);
    assert!(deleted.status.success(), "{deleted:?}");
    let (code, after_delete) = run_once(&server.url(), "counter");
    assert_eq!(code, Some(0));
    let after_delete = after_delete.expect("a fence");
    assert!(
        after_delete > *seen.last().unwrap(),
        "{after_delete} after {seen:?}"
    );

    // A client-go holder in between: the next lockward fence is larger too.
    let mut go = KillOnDrop(
        server
            .lease_leader_command("lockward-counter", "go-1", TIMING)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let lines = read_lines(&mut go.0);
    wait_for_line(&lines, "started leading go-1", Duration::from_secs(10));
    common::signal(go.0.id(), libc::SIGTERM); // ReleaseOnCancel: it releases
    common::wait_exit(&mut go.0, Duration::from_secs(10));
    assert_eq!(
        lease_field(&server, "lockward-counter", ".spec.holderIdentity"),
        ""
    );
    let (code, after_go) = run_once(&server.url(), "counter");
    assert_eq!(code, Some(0));
    assert!(after_go.expect("a fence") > after_delete);
}

/// Collects a child's stdout lines in the background.
fn read_lines(child: &mut Child) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    use std::io::BufRead;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let out = child.stdout.take().expect("piped stdout");
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

/// The time (ms since the epoch) of the first line ending in `what`,
/// waiting up to `within`.
fn wait_for_line(lines: &std::sync::Mutex<Vec<String>>, what: &str, within: Duration) -> u64 {
    let until = Instant::now() + within;
    loop {
        if let Some(at) = find_line(lines, what) {
            return at;
        }
        assert!(
            Instant::now() < until,
            "no {what:?} within {within:?}: {:?}",
            lines.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn find_line(lines: &std::sync::Mutex<Vec<String>>, what: &str) -> Option<u64> {
    lines
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.ends_with(what))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
}

/// `lockward elect scheduler` whose command appends `MILLIS beat ID` to
/// `beats` every 50 ms while it leads.
fn lockward_candidate(url: &str, dir: &Path, id: &str) -> KillOnDrop {
    let script = r#"while :; do echo "$(date +%s%3N) beat $1" >> "$2/beats"; sleep 0.05; done"#;
    KillOnDrop(
        Command::new(lockward())
            .args(["--store", url, "elect", "scheduler", "--identity", id])
            .args([
                "--lease",
                "3s",
                "--renew-deadline",
                "2s",
                "--retry",
                "500ms",
                "--",
            ])
            .args(["sh", "-c", script, "sh", id])
            .arg(dir)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// (first, last) beat time of lockward's command.
fn beats(dir: &Path) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(dir.join("beats")).ok()?;
    let times: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    Some((*times.first()?, *times.last()?))
}

fn wait_for_beats(dir: &Path, within: Duration) -> u64 {
    let until = Instant::now() + within;
    loop {
        if let Some((first, _)) = beats(dir) {
            return first;
        }
        assert!(
            Instant::now() < until,
            "lockward's command never started leading"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Longest a candidate may take to lead after the leader is killed: the
/// lease duration plus one retry period as client-go jitters it (up to
/// 2.2 × the period: `wait.JitterUntil` with its jitter factor 1.2), and a
/// second for process start-up and a small, busy machine.
fn takeover_bound() -> Duration {
    TIMING[0] + TIMING[2].mul_f64(2.2) + Duration::from_secs(1)
}

#[test]
fn lockward_leads_first_then_client_go_after_a_kill() {
    let _turn = one_at_a_time();
    let server = KubeApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut lw = lockward_candidate(&server.url(), dir.path(), "lw-1");
    wait_for_beats(dir.path(), Duration::from_secs(10));
    let mut go = KillOnDrop(
        server
            .lease_leader_command("lockward-scheduler", "go-1", TIMING)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let lines = read_lines(&mut go.0);
    // client-go sees lockward's candidate as the leader, and does not lead
    // for longer than a lease while lockward renews.
    wait_for_line(&lines, "candidate go-1", Duration::from_secs(10));
    std::thread::sleep(TIMING[0] + Duration::from_secs(1));
    assert_eq!(
        find_line(&lines, "started leading go-1"),
        None,
        "both led: {:?}",
        lines.lock().unwrap()
    );
    let seen = lines.lock().unwrap().clone();
    assert!(
        seen.iter().any(|l| l.contains("leader is lw-1_")),
        "{seen:?}"
    );
    let transitions: u32 = lease_field(&server, "lockward-scheduler", ".spec.leaseTransitions")
        .parse()
        .unwrap();

    let killed = now_ms();
    lw.0.kill().unwrap();
    lw.0.wait().unwrap();
    let started = wait_for_line(
        &lines,
        "started leading go-1",
        takeover_bound() + Duration::from_secs(5),
    );
    let (_, last_beat) = beats(dir.path()).unwrap();
    assert!(
        last_beat < started,
        "lockward's command beat at {last_beat} after client-go led at {started}"
    );
    assert!(
        Duration::from_millis(started.saturating_sub(killed)) <= takeover_bound(),
        "client-go led {} ms after the kill",
        started - killed
    );
    let after: u32 = lease_field(&server, "lockward-scheduler", ".spec.leaseTransitions")
        .parse()
        .unwrap();
    assert!(
        after > transitions,
        "leaseTransitions {transitions} -> {after}"
    );
}

#[test]
fn client_go_leads_first_then_lockward_after_a_kill() {
    let _turn = one_at_a_time();
    let server = KubeApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut go = KillOnDrop(
        server
            .lease_leader_command("lockward-scheduler", "go-1", TIMING)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let lines = read_lines(&mut go.0);
    wait_for_line(&lines, "started leading go-1", Duration::from_secs(10));
    let _lw = lockward_candidate(&server.url(), dir.path(), "lw-1");
    // lockward waits for longer than a lease while client-go renews.
    std::thread::sleep(TIMING[0] + Duration::from_secs(2));
    assert_eq!(beats(dir.path()), None, "lockward led while client-go did");
    let status = Command::new(lockward())
        .args(["--store", &server.url(), "status", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let row = rows
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "scheduler"))
        .cloned();
    assert_eq!(
        row.as_ref().map(|r| r["holder"].clone()),
        Some("go-1".into()),
        "{rows}"
    );
    let transitions: u32 = lease_field(&server, "lockward-scheduler", ".spec.leaseTransitions")
        .parse()
        .unwrap();

    let killed = now_ms();
    go.0.kill().unwrap();
    go.0.wait().unwrap();
    let started = wait_for_beats(dir.path(), takeover_bound() + Duration::from_secs(5));
    assert!(
        Duration::from_millis(started.saturating_sub(killed)) <= takeover_bound(),
        "lockward led {} ms after the kill",
        started - killed
    );
    let after: u32 = lease_field(&server, "lockward-scheduler", ".spec.leaseTransitions")
        .parse()
        .unwrap();
    assert!(
        after > transitions,
        "leaseTransitions {transitions} -> {after}"
    );
    let holder = lease_field(&server, "lockward-scheduler", ".spec.holderIdentity");
    assert!(holder.starts_with("lw-1_"), "{holder}");
}

/// A `lockward run slow` whose command waits for the file `go` in `dir`,
/// then appends its fence to `slow`.
fn slow_run(url: &str, dir: &Path) -> Child {
    let script =
        r#"while [ ! -e "$1/go" ]; do sleep 0.05; done; echo "$LOCKWARD_FENCE" >> "$1/slow""#;
    Command::new(lockward())
        .args([
            "--store", url, "run", "slow", "--ttl", "60s", "--wait", "120s", "--",
        ])
        .args(["sh", "-c", script, "sh"])
        .arg(dir)
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn waiters_ride_out_a_killed_api_server() {
    let _turn = one_at_a_time();
    let mut server = KubeApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("counter"), "0\n").unwrap();
    let url = server.url();
    // A holder that holds through the outage and two waiters behind it.
    let mut slow: Vec<KillOnDrop> = vec![KillOnDrop(slow_run(&url, dir.path()))];
    wait_until_held(&url, "slow");
    slow.push(KillOnDrop(slow_run(&url, dir.path())));
    slow.push(KillOnDrop(slow_run(&url, dir.path())));
    // And churn beside them: short runs that keep taking another lock.
    let path = dir.path().to_path_buf();
    let churn_url = url.clone();
    let work = std::thread::spawn(move || increments(&churn_url, &path, 3, 30, "120s"));
    std::thread::sleep(Duration::from_secs(2));
    let before = fences(dir.path()).len();
    server.kill_apiserver();
    std::thread::sleep(Duration::from_secs(3));
    server.start_apiserver();
    std::fs::write(dir.path().join("go"), "").unwrap();
    for run in &mut slow {
        let status = common::wait_exit(&mut run.0, Duration::from_secs(60));
        assert!(
            status.success(),
            "a run that held or waited through the outage failed: {status}"
        );
    }
    let slow_fences: Vec<u64> = std::fs::read_to_string(dir.path().join("slow"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(slow_fences.len(), 3, "{slow_fences:?}");
    assert!(
        slow_fences.windows(2).all(|w| w[0] < w[1]),
        "{slow_fences:?}"
    );

    let spans = work.join().expect("workers");
    let seen = fences(dir.path());
    let counter = std::fs::read_to_string(dir.path().join("counter")).unwrap();
    assert_eq!(counter.trim(), "90", "lost updates: two holders at once");
    assert_eq!(seen.len(), 90);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "fences not increasing: {seen:?}"
    );
    assert!(before < 90, "the kill came after the work was done");
    let refused = spans
        .iter()
        .filter(|(_, _, code)| *code == Some(69))
        .count();
    eprintln!("{before} short runs before the kill; {refused} started during the outage and were tried again");
}

/// Waits until `status` shows `name` held.
fn wait_until_held(url: &str, name: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let out = Command::new(lockward())
            .args(["--store", url, "status", "--json"])
            .output()
            .unwrap();
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if rows
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["name"] == name))
        {
            return;
        }
        assert!(Instant::now() < until, "{name} was never held");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The race of client-go's and lockward's candidates for one Lease, as a
/// mixed fleet runs it: lease 4 s, renew deadline 3 s, retry 500 ms.
const RACE_TIMING: [Duration; 3] = [
    Duration::from_secs(4),
    Duration::from_secs(3),
    Duration::from_millis(500),
];

/// One candidate of the race: client-go's elector (its stdout lines) or
/// `lockward elect` (its command's beats, in `dir/beats`).
struct Racer {
    id: String,
    process: KillOnDrop,
    lines: Option<std::sync::Arc<std::sync::Mutex<Vec<String>>>>,
}

impl Racer {
    fn client_go(server: &KubeApiServer, id: &str) -> Racer {
        let mut process = KillOnDrop(
            server
                .lease_leader_command("lockward-scheduler", id, RACE_TIMING)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let lines = read_lines(&mut process.0);
        wait_for_line(&lines, &format!("candidate {id}"), Duration::from_secs(10));
        Racer {
            id: id.to_string(),
            process,
            lines: Some(lines),
        }
    }

    fn lockward(server: &KubeApiServer, dir: &Path, id: &str) -> Racer {
        let script = r#"while :; do echo "$(date +%s%3N) beat $1" >> "$2/beats"; sleep 0.05; done"#;
        let process = KillOnDrop(
            Command::new(lockward())
                .args(["--store", &server.url(), "elect", "scheduler"])
                .args(["--identity", id, "--lease", "4s"])
                .args(["--renew-deadline", "3s", "--retry", "500ms", "--"])
                .args(["sh", "-c", script, "sh", id])
                .arg(dir)
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        Racer {
            id: id.to_string(),
            process,
            lines: None,
        }
    }

    fn is_lockward(&self) -> bool {
        self.lines.is_none()
    }

    /// When this candidate started leading (ms since the epoch), if it has.
    fn started(&self, dir: &Path) -> Option<u64> {
        match &self.lines {
            Some(lines) => find_line(lines, &format!("started leading {}", self.id)),
            None => self.beats(dir).first().copied(),
        }
    }

    /// The last time this candidate acted as the leader, if it did.
    fn last_led(&self, dir: &Path) -> Option<u64> {
        self.beats(dir).last().copied()
    }

    fn beats(&self, dir: &Path) -> Vec<u64> {
        let text = std::fs::read_to_string(dir.join("beats")).unwrap_or_default();
        let mine = format!(" beat {}", self.id);
        text.lines()
            .filter(|l| l.ends_with(&mine))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    }
}

#[test]
fn lockward_and_client_go_candidates_share_the_takeovers_after_kills() {
    const ROUNDS: usize = 8;
    let _turn = one_at_a_time();
    let server = KubeApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // client-go's candidates first: the first takeover is theirs to lose.
    let mut racers = vec![
        Racer::client_go(&server, "go-1"),
        Racer::client_go(&server, "go-2"),
    ];
    let until = Instant::now() + Duration::from_secs(15);
    while !racers.iter().any(|r| r.started(dir).is_some()) {
        assert!(Instant::now() < until, "nobody led");
        std::thread::sleep(Duration::from_millis(20));
    }
    racers.push(Racer::lockward(&server, dir, "lw-1"));
    racers.push(Racer::lockward(&server, dir, "lw-2"));
    let mut takeovers = Vec::new();
    let mut reigns: Vec<(String, u64, u64)> = Vec::new();
    // Fresh candidates are numbered from 3.
    for fresh in 3..3 + ROUNDS {
        // The leader leads for a few renewals, with every waiter watching.
        std::thread::sleep(Duration::from_millis(1_500));
        let leading: Vec<usize> = (0..racers.len())
            .filter(|&i| racers[i].started(dir).is_some())
            .collect();
        assert_eq!(leading.len(), 1, "not one leader among the living");
        let mut leader = racers.remove(leading[0]);
        let killed = now_ms();
        leader.process.0.kill().unwrap();
        leader.process.0.wait().unwrap();
        let until = Instant::now() + RACE_TIMING[0] + Duration::from_secs(5);
        let (next, started) = loop {
            if let Some((i, at)) = racers
                .iter()
                .enumerate()
                .find_map(|(i, r)| r.started(dir).map(|at| (i, at)))
            {
                break (i, at);
            }
            assert!(Instant::now() < until, "nobody took over after the kill");
            std::thread::sleep(Duration::from_millis(10));
        };
        // When the winner wrote the Lease, on this host's clock.
        let acquired = lease_field(&server, "lockward-scheduler", ".spec.acquireTime");
        let taken = chrono::DateTime::parse_from_rfc3339(&acquired)
            .map(|t| t.timestamp_millis() as u64)
            .unwrap_or_else(|e| panic!("acquireTime {acquired:?}: {e}"));
        let began = leader.started(dir).unwrap();
        let ended = leader.last_led(dir).unwrap_or(killed).max(killed);
        reigns.push((leader.id.clone(), began, ended));
        takeovers.push((
            leader.is_lockward(),
            racers[next].is_lockward(),
            taken.saturating_sub(killed),
            started.saturating_sub(killed),
        ));
        assert!(
            started > leader.last_led(dir).unwrap_or(0),
            "{} led at {started} while {} still acted",
            racers[next].id,
            leader.id
        );
        // A fresh candidate of the killed kind joins.
        let id = if leader.is_lockward() {
            format!("lw-{fresh}")
        } else {
            format!("go-{fresh}")
        };
        let joined = if leader.is_lockward() {
            Racer::lockward(&server, dir, &id)
        } else {
            Racer::client_go(&server, &id)
        };
        racers.push(joined);
    }
    let describe = |(from, to, taken, leading): &(bool, bool, u64, u64)| {
        let kind = |lw: &bool| if *lw { "lockward" } else { "client-go" };
        format!(
            "{} -> {}: Lease taken {taken} ms after the kill, leading {leading} ms after",
            kind(from),
            kind(to)
        )
    };
    let report: Vec<String> = takeovers.iter().map(describe).collect();
    println!("takeovers: {report:#?}");
    // No two reigns overlap.
    reigns.sort_by_key(|r| r.1);
    for pair in reigns.windows(2) {
        assert!(pair[0].2 < pair[1].1, "overlap: {pair:?}");
    }
    let lease = RACE_TIMING[0].as_millis() as u64;
    // Measured to when the winner leads: its command started, or client-go
    // called OnStartedLeading.
    for (_, _, _, ms) in &takeovers {
        assert!(*ms <= lease + 1_000, "a takeover took {ms} ms: {report:?}");
    }
    let mut times: Vec<u64> = takeovers.iter().map(|t| t.3).collect();
    times.sort_unstable();
    let median = times[times.len() / 2];
    assert!(median <= lease + 600, "median {median} ms: {report:?}");
    let won = takeovers.iter().filter(|t| t.1).count();
    assert!(
        won * 3 >= takeovers.len(),
        "lockward won {won} of {}: {report:?}",
        takeovers.len()
    );
    assert!(
        takeovers.iter().any(|t| !t.0 && t.1),
        "never from client-go to lockward: {report:?}"
    );
}
