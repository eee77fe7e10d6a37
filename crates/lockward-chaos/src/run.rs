//! One run: start the backend, start the clients of every workload, inject
//! faults on a seeded schedule, stop, and judge the history.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::checker::{check, Findings};
use crate::cron_check::check_cron;
use crate::guarded_check::{check_guarded, GuardedFindings};
use crate::guarded_client;
use crate::history::{self, mono_ns, Kind};
use crate::report::{judge, Report};
use crate::rw_check::check_rw;
use crate::sem_check::check_sem;
use crate::target::{wait_stopped, FaultKind, FaultRecord, Target};
use crate::workload::{Workload, TTL};

/// How a run is set up.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The backend's name (see [`crate::target::BACKENDS`]).
    pub backend: String,
    /// How long the clients run.
    pub duration: Duration,
    /// Seed of the fault schedule.
    pub seed: u64,
    /// Use the fence-ignoring register for the fenced workload (I4).
    pub mutant: bool,
    /// The `lockward-chaos` binary, to start clients with.
    pub exe: std::path::PathBuf,
}

/// Clients per workload.
const CLIENTS: &[(Workload, u32)] = &[
    (Workload::Fenced, 3),
    (Workload::Unfenced, 3),
    (Workload::Election, 2),
    (Workload::RwWriter, 2),
    (Workload::RwReader, 2),
    (Workload::Cron, 3),
    (Workload::Semaphore, 4),
    (Workload::Served, 2),
    (Workload::Guarded, 3),
];

/// Runs `config` and returns its report.
pub async fn run(config: &RunConfig) -> Result<Report, String> {
    let mut target = Target::start(&config.backend).await?;
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = tmp.path().to_path_buf();
    // LOCKWARD_CHAOS_KEEP=1 keeps the histories for a closer look; a
    // failed verdict keeps them too (below).
    let mut tmp = if std::env::var_os("LOCKWARD_CHAOS_KEEP").is_some() {
        eprintln!("lockward-chaos: histories kept in {}", path.display());
        let _ = tmp.keep();
        None
    } else {
        Some(tmp)
    };
    // The guarded workload's database: a PostgreSQL of its own, never
    // faulted (the resource, not the lock's store).
    let guarded_db = match config.mutant {
        true => None,
        false => Some(guarded_database(&config.exe).await?),
    };
    let began = mono_ns();
    // Clients run until told to stop (the `stop` file), or this cap.
    let until = began + (config.duration + Duration::from_secs(120)).as_nanos() as u64;
    let end_faults = began + config.duration.as_nanos() as u64;
    let mut clients: Vec<Child> = Vec::new();
    let mut workload_of: Vec<usize> = Vec::new();
    for (w, &(workload, n)) in CLIENTS.iter().enumerate() {
        // The mutant's register ignores fences; served clients would write
        // the fenced one beside it, judged with nobody. The mutant run
        // judges the register alone.
        if matches!(workload, Workload::Served | Workload::Guarded) && config.mutant {
            continue;
        }
        let workload = if workload == Workload::Fenced && config.mutant {
            Workload::Mutant
        } else {
            workload
        };
        for i in 0..n {
            clients.push(spawn_client(
                &config.exe,
                &target.url,
                workload,
                i,
                path.as_path(),
                until,
                guarded_db.as_ref().map(|(_, url)| url.as_str()),
            )?);
            workload_of.push(w);
        }
    }
    let mut pauses = 0usize;
    let mut rng = fastrand::Rng::with_seed(config.seed);
    let first_fault = rng.usize(0..target.faults.len().max(1));
    let mut log: Vec<FaultRecord> = Vec::new();
    // Let the clients get going, then a fault every 0.5–1.5 s.
    tokio::time::sleep(Duration::from_millis(700)).await;
    // Faults until the duration is over and every kind has run once.
    let mut kinds_seen = std::collections::BTreeSet::new();
    while mono_ns() + 1_500_000_000 < end_faults || kinds_seen.len() < target.faults.len() + 1 {
        if mono_ns() > until - 10_000_000_000 {
            break;
        }
        // Every other fault pauses a client; the others are the target's.
        // The target's faults in turn, from a seeded start, so a short run
        // still sees each kind.
        let kind = if log.len() % 2 == 0 || target.faults.is_empty() {
            FaultKind::PauseClient
        } else {
            let n = target.faults.len();
            target.faults[(first_fault + log.len() / 2) % n]
        };
        let record = if kind == FaultKind::PauseClient {
            // Each workload in turn, and its holder when one holds (a pause
            // elsewhere rarely matters): wait briefly for one.
            // The control first (its anomalies show the faults bite), then
            // the guarded table's commands; for the mutant, the fenced
            // workload first.
            let order = if config.mutant {
                [0, 1, 2, 3, 4, 5, 6, 7, 8]
            } else {
                [1, 8, 0, 7, 2, 3, 4, 5, 6]
            };
            let turn = order[pauses % CLIENTS.len()];
            pauses += 1;
            let mut holders = Vec::new();
            for _ in 0..50 {
                holders = (0..clients.len())
                    .filter(|&i| workload_of[i] == turn)
                    .filter(|&i| {
                        path.as_path()
                            .join(format!("holding-{}", clients[i].id()))
                            .exists()
                    })
                    .collect();
                if !holders.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let pick = if holders.is_empty() {
                rng.usize(0..clients.len())
            } else {
                holders[rng.usize(0..holders.len())]
            };
            // The first pause of each workload outlasts the lease for sure.
            let hold = if pauses <= CLIENTS.len() {
                TTL.mul_f64(1.5 + rng.f64() * 0.5)
            } else {
                TTL.mul_f64(0.5 + rng.f64() * 2.5)
            };
            if CLIENTS[workload_of[pick]].0 == Workload::Guarded {
                pause_guarded(&clients[pick], path.as_path(), hold).await
            } else {
                pause(&clients[pick], hold).await
            }
        } else {
            let hold = Duration::from_millis(rng.u64(300..900));
            target.inflict(kind, hold).await
        };
        kinds_seen.insert(record.kind);
        log.push(record);
        tokio::time::sleep(Duration::from_millis(rng.u64(300..900))).await;
    }
    // The last fault heals; clients run on a little, then stop.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let _ = std::fs::write(path.join("stop"), "");
    // Wait for the clients to stop by themselves; then make sure.
    let deadline = mono_ns() + 8_000_000_000;
    for c in &mut clients {
        while mono_ns() < deadline && c.try_wait().ok().flatten().is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // SAFETY: kill(2) on a child we started and have not reaped.
        unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
        let _ = c.kill();
        let _ = c.wait();
    }
    let guarded = guarded_db
        .as_ref()
        .map(|(db, _)| judge_guarded(db, path.as_path()));
    let mut report = report(config, &target, path.as_path(), began, log, guarded).await?;
    if report.verdict == "failed" || tmp.is_none() {
        if let Some(tmp) = tmp.take() {
            let _ = tmp.keep();
        }
        report.kept_in = Some(path.display().to_string());
    }
    Ok(report)
}

/// Starts the guarded workload's PostgreSQL and guards its table; the
/// server and its URL.
async fn guarded_database(
    exe: &Path,
) -> Result<(lockward_testkit::PostgresServer, String), String> {
    let lockward = exe.with_file_name("lockward");
    if !lockward.exists() {
        return Err(format!(
            "the guarded workload runs `lockward run --fence-db`: no lockward binary at {} (cargo build -p lockward-cli)",
            lockward.display()
        ));
    }
    let server = tokio::task::block_in_place(lockward_testkit::PostgresServer::start);
    let url = server.url();
    let table = |name: &str| {
        format!("CREATE TABLE {name} (client int NOT NULL, fence bigint NOT NULL, noted bigint NOT NULL)")
    };
    tokio::task::block_in_place(|| {
        server.psql(&table(guarded_client::GUARDED));
        server.psql(&table(guarded_client::PLAIN));
    });
    let mut db = lockward::fence::FenceDb::connect(&url)
        .await
        .map_err(|e| e.to_string())?;
    db.install(
        &[guarded_client::GUARDED.to_string()],
        guarded_client::LOCK,
        lockward::fence::Unfenced::Refuse,
        None,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok((server, url))
}

/// I10 on the guarded table, and the same check on the plain one.
fn judge_guarded(
    db: &lockward_testkit::PostgresServer,
    dir: &Path,
) -> (GuardedFindings, GuardedFindings, u64) {
    let pairs = |text: &str| -> Vec<(u64, u64)> {
        text.lines()
            .filter_map(|line| {
                let (a, b) = line.trim().split_once(' ')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect()
    };
    let starts =
        pairs(&std::fs::read_to_string(dir.join(guarded_client::STARTS)).unwrap_or_default());
    let rows = |table: &str| {
        pairs(&tokio::task::block_in_place(|| {
            db.psql(&format!("SELECT fence || ' ' || noted FROM {table}"))
        }))
    };
    let refused = std::fs::read_to_string(dir.join(guarded_client::REFUSED))
        .unwrap_or_default()
        .lines()
        .count() as u64;
    (
        check_guarded(&rows(guarded_client::GUARDED), &starts),
        check_guarded(&rows(guarded_client::PLAIN), &starts),
        refused,
    )
}

fn spawn_client(
    exe: &Path,
    url: &str,
    workload: Workload,
    index: u32,
    dir: &Path,
    until: u64,
    guarded_db: Option<&str>,
) -> Result<Child, String> {
    let mut command = Command::new(exe);
    if let Some(db) = guarded_db {
        command
            .env(guarded_client::LOCKWARD_ENV, exe.with_file_name("lockward"))
            .env(guarded_client::FENCE_DB_ENV, db);
    }
    command
        .args(["client", "--url", url, "--workload", workload.name()])
        .args(["--index", &index.to_string(), "--until", &until.to_string()])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start a client: {e}"))
}

/// A guarded client's whole `lockward run` (lockward, its keeper, the
/// command and its `psql`) stopped for `hold`; then the command alone is
/// resumed for a while, so nothing of lockward's can stop it before it
/// writes with its old fence; then the rest.
async fn pause_guarded(client: &Child, dir: &Path, hold: Duration) -> FaultRecord {
    let start = mono_ns();
    let run: Option<u32> = std::fs::read_to_string(guarded_client::run_file(dir, client.id()))
        .ok()
        .and_then(|pid| pid.trim().parse().ok());
    let Some(run) = run else {
        return pause(client, hold).await;
    };
    let mut tree = vec![run];
    tree.extend(lockward_testkit::descendants(run));
    for pid in &tree {
        // SAFETY: kill(2) on processes of our own client's tree.
        unsafe { libc::kill(*pid as i32, libc::SIGSTOP) };
    }
    let stopped = tokio::task::block_in_place(|| wait_stopped(run, Duration::from_millis(500)));
    tokio::time::sleep(hold).await;
    // The command, if this run had started one (an older file names a
    // process outside this tree: left alone).
    let command: Option<u32> =
        std::fs::read_to_string(guarded_client::command_file(dir, client.id()))
            .ok()
            .and_then(|pid| pid.trim().parse().ok())
            .filter(|pid| tree.contains(pid));
    let mut woken = Vec::new();
    if let Some(command) = command {
        woken.push(command);
        woken.extend(lockward_testkit::descendants(command));
        for pid in &woken {
            // SAFETY: as above.
            unsafe { libc::kill(*pid as i32, libc::SIGCONT) };
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    for pid in tree.iter().filter(|p| !woken.contains(p)) {
        // SAFETY: as above.
        unsafe { libc::kill(*pid as i32, libc::SIGCONT) };
    }
    FaultRecord {
        kind: FaultKind::PauseClient,
        start,
        healed: mono_ns(),
        proof: format!(
            "lockward run pid {run} and its {} descendants stopped for {hold:?}; /proc state T seen: {stopped}; command resumed alone first: {}",
            tree.len() - 1,
            command.is_some()
        ),
        ended_holds: Vec::new(),
        forgot_at: None,
    }
}

/// SIGSTOP for `hold`, proved by the process state, then SIGCONT.
async fn pause(client: &Child, hold: Duration) -> FaultRecord {
    let pid = client.id();
    let start = mono_ns();
    // SAFETY: kill(2) on a child we started and have not reaped.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    let stopped = tokio::task::block_in_place(|| wait_stopped(pid, Duration::from_millis(500)));
    tokio::time::sleep(hold).await;
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    FaultRecord {
        kind: FaultKind::PauseClient,
        start,
        healed: mono_ns(),
        proof: format!("client pid {pid} stopped for {hold:?}; /proc state T seen: {stopped}"),
        ended_holds: Vec::new(),
        forgot_at: None,
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn report(
    config: &RunConfig,
    target: &Target,
    dir: &Path,
    began: u64,
    log: Vec<FaultRecord>,
    guarded: Option<(GuardedFindings, GuardedFindings, u64)>,
) -> Result<Report, String> {
    let mut findings: BTreeMap<&str, (Findings, Vec<history::Op>)> = BTreeMap::new();
    let mut rw_ops = Vec::new();
    let mut cron_ops = Vec::new();
    let mut sem_ops = Vec::new();
    for &(workload, _) in CLIENTS {
        if workload == Workload::Cron {
            cron_ops = history::load(&dir.join(workload.name()));
            continue;
        }
        if workload == Workload::Semaphore {
            sem_ops = history::load(&dir.join(workload.name()));
            continue;
        }
        if matches!(workload, Workload::RwWriter | Workload::RwReader) {
            rw_ops.extend(history::load(&dir.join(workload.name())));
            continue;
        }
        if matches!(workload, Workload::Served | Workload::Guarded) {
            // Judged with the fenced clients, below; judged from the
            // database.
            continue;
        }
        let workload = if workload == Workload::Fenced && config.mutant {
            Workload::Mutant
        } else {
            workload
        };
        let mut ops = history::load(&dir.join(workload.name()));
        if workload == Workload::Fenced {
            // One lock and one register, taken directly and through the
            // daemon: one history.
            ops.extend(history::load(&dir.join(Workload::Served.name())));
            ops.sort_by_key(|o| (o.start, o.client));
        }
        let register = workload.register(dir).await.map_err(|e| e.to_string())?;
        let last = register
            .read(workload.name())
            .await
            .ok()
            .flatten()
            .and_then(|f| String::from_utf8(f.value).ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let role = match workload {
            Workload::Unfenced => "control",
            Workload::Election => "election",
            _ => "fenced",
        };
        findings.insert(role, (check(&ops, last), ops));
    }
    let forgotten: Vec<u64> = log
        .iter()
        .filter(|f| target.forgets_locks(f.kind))
        .map(|f| f.forgot_at.unwrap_or(f.start))
        .collect();
    // The holds of `lock` that forced unlocks ended.
    let ended = |lock: &str| -> Vec<history::Ended> {
        log.iter()
            .flat_map(|f| {
                f.ended_holds
                    .iter()
                    .filter(move |h| h.lock == lock)
                    .map(|h| history::Ended {
                        fence: h.fence,
                        from: f.start,
                        to: f.healed,
                    })
            })
            .collect()
    };
    let rw = check_rw(&rw_ops, &forgotten, &ended("chaos-rw"));
    let cron = check_cron(&cron_ops, &forgotten);
    let sem = check_sem(
        &sem_ops,
        u64::from(crate::sem_client::PERMITS),
        &forgotten,
        &ended("chaos-sem"),
    );
    let get = |k: &str| findings.get(k).map(|(f, _)| f.clone()).unwrap_or_default();
    let (fenced, election, control) = (get("fenced"), get("election"), get("control"));
    // I6: from each fault's healing to the next successful acquisition.
    let mut grants: Vec<u64> = findings
        .values()
        .flat_map(|(_, ops)| ops.iter())
        .chain(&rw_ops)
        .filter(|o| o.kind == Kind::Acquire && o.outcome == history::Outcome::Ok)
        .map(|o| o.end)
        .collect();
    grants.sort();
    let mut recovery: Vec<u64> = log
        .iter()
        .filter(|f| f.kind != FaultKind::PauseClient)
        .filter_map(|f| {
            grants
                .iter()
                .find(|&&g| g >= f.healed)
                .map(|g| (g - f.healed) / 1_000_000)
        })
        .collect();
    recovery.sort();
    let mut faults = BTreeMap::new();
    let mut fault_ms = BTreeMap::new();
    for f in &log {
        *faults.entry(f.kind).or_insert(0) += 1;
        *fault_ms.entry(f.kind).or_insert(0) += (f.healed - f.start) / 1_000_000;
    }
    let sum = |g: fn(&Findings) -> u64| g(&fenced) + g(&election) + g(&control);
    let mut report = Report {
        backend: target.name.clone(),
        seed: config.seed,
        duration_ms: (mono_ns() - began) / 1_000_000,
        mutant: config.mutant,
        ops_ok: sum(|f| f.ops_ok),
        ops_failed: sum(|f| f.ops_failed),
        ops_indeterminate: sum(|f| f.ops_indeterminate),
        faults,
        fault_ms,
        stale_accepted: fenced.stale_accepted + election.stale_accepted,
        stale_rejected: fenced.stale_rejected + election.stale_rejected,
        lost_updates: fenced.lost_updates + election.lost_updates,
        order_violations: fenced.order_violations + election.order_violations,
        unfenced_overlaps: control.overlaps,
        unfenced_overlap_ms: control.overlap_ns / 1_000_000,
        unfenced_lost_updates: control.lost_updates,
        recovery_ms_p50: percentile(&recovery, 0.5),
        recovery_ms_p99: percentile(&recovery, 0.99),
        recovery_ms_max: recovery.last().copied().unwrap_or(0),
        recovery_budget_ms: (TTL + target.failover).as_millis() as u64 + 3_000,
        rw_reads: rw.reads,
        rw_torn_reads: rw.torn,
        rw_torn_excused: rw.excused,
        rw_torn_violations: rw.violations,
        cron_executions: cron.executions,
        cron_overlaps: cron.overlaps,
        cron_overlaps_excused: cron.excused,
        served_holds: findings
            .get("fenced")
            .map(|(_, ops)| {
                ops.iter()
                    .filter(|o| o.kind == Kind::Acquire && o.outcome == history::Outcome::Ok)
                    .filter(|o| o.client >= crate::client::SERVED_INDEX)
                    .count() as u64
            })
            .unwrap_or(0),
        sem_holds: sem.holds,
        sem_most_at_once: sem.most,
        sem_over_permits: sem.over,
        sem_over_excused: sem.excused,
        sem_crowds: sem.crowds,
        kept_in: None,
        guarded_rows: guarded.as_ref().map_or(0, |g| g.0.rows),
        guarded_stale: guarded.as_ref().map_or(0, |g| g.0.stale),
        guarded_refused: guarded.as_ref().map_or(0, |g| g.2),
        guarded_control_stale: guarded.as_ref().map_or(0, |g| g.1.stale),
        acted_after_deadline_ms: fenced
            .acted_after_deadline_ns
            .max(control.acted_after_deadline_ns)
            / 1_000_000,
        verdict: String::new(),
        reasons: Vec::new(),
        fault_log: log,
    };
    judge(&mut report, &fenced, &election, &control);
    Ok(report)
}
