//! `lockward demo [--json] [--failover]`: the six classic scenarios, run as
//! real processes on the store, each without and with protection; with
//! `--failover`, the paused holder also on a Redis that fails over in the
//! middle (`failover.rs`). Every figure
//! is counted from what the processes left behind (files, the store), never
//! assumed.

#[cfg(any(feature = "postgres", feature = "mysql"))]
mod db_guard;
mod failover;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub mod for_update;
mod worker;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockward::fence::FencedResource;
use lockward::recipe::Optimistic;
use lockward::Store;

use crate::exit;

/// One variant of one scenario, as measured.
struct Row {
    scenario: &'static str,
    variant: &'static str,
    protected: bool,
    anomalies: u64,
    detail: Vec<(&'static str, String)>,
}

/// Run the classic scenarios (payment, inventory, cron, migration, price report, paused holder) as real processes, without and with protection.
#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 when every protected variant shows no anomaly, 1 otherwise.\nWithout --store (or $LOCKWARD_STORE) it runs on a fresh embedded SQLite store."
)]
pub struct DemoArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
    /// Also run the paused-holder story on a Redis primary and replica the
    /// demo starts itself (needs redis-server), which fails over while the
    /// holder is paused: the promoted replica grants the lock again.
    #[arg(long)]
    pub failover: bool,
}

/// One process of `lockward demo` (internal).
#[derive(clap::Args)]
pub struct WorkerArgs {
    role: String,
    dir: std::path::PathBuf,
    run: String,
}

/// Runs one worker process; exit status 1 when it failed.
pub async fn worker(store: &Store, url: &str, args: WorkerArgs) -> u8 {
    match worker::work(store, url, &args.role, &args.dir, &args.run).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("lockward demo-worker {}: {e}", args.role);
            exit::SOFTWARE
        }
    }
}

/// Runs every scenario; exit status 0 only when every protected variant
/// shows no anomaly.
pub async fn demo(store: &Store, url: &str, args: DemoArgs) -> u8 {
    let json = args.json;
    if !store.capabilities().cross_process {
        eprintln!("lockward: the demo runs separate processes; {url} is private to one (use sqlite:// or a server)");
        return exit::USAGE;
    }
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("lockward: cannot make a work directory: {e}");
            return exit::SOFTWARE;
        }
    };
    let run = format!("{:x}", fastrand::u64(..));
    let demo = Demo {
        url: url.to_string(),
        dir: dir.path().to_path_buf(),
        run,
    };
    let mut rows = Vec::new();
    for scenario in [
        Demo::payment as fn(&Demo) -> Vec<Row>,
        Demo::migration,
        Demo::cron,
    ] {
        rows.extend(scenario(&demo));
    }
    rows.extend(demo.inventory(store).await);
    rows.extend(demo.price_report());
    rows.extend(demo.paused_holder().await);
    if args.failover {
        match demo.paused_holder_across_a_failover().await {
            Ok(more) => rows.extend(more),
            Err(e) => {
                eprintln!("lockward: demo --failover: {e}");
                return exit::UNAVAILABLE;
            }
        }
    }
    let passed = rows.iter().all(|r| !r.protected || r.anomalies == 0);
    if json {
        print_json(store, &rows, passed);
    } else {
        print_table(store, &rows, passed);
    }
    if passed {
        0
    } else {
        1
    }
}

struct Demo {
    url: String,
    dir: PathBuf,
    run: String,
}

impl Demo {
    fn spawn(&self, role: &str) -> Option<Child> {
        self.spawn_on(&self.url, role)
    }

    /// A worker of `role` on the store of `url`.
    fn spawn_on(&self, url: &str, role: &str) -> Option<Child> {
        let exe = std::env::current_exe().ok()?;
        Command::new(exe)
            .args(["--store", url, "demo-worker", role])
            .arg(&self.dir)
            .arg(&self.run)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()
    }

    /// Starts `n` processes of `role` together and waits for them all.
    fn together(&self, role: &str, n: usize) -> Duration {
        let began = Instant::now();
        let children: Vec<Child> = (0..n).filter_map(|_| self.spawn(role)).collect();
        for mut c in children {
            let _ = c.wait();
        }
        began.elapsed()
    }

    fn lines(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.join(file))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Scenario 1: four instances receive the same order.
    fn payment(&self) -> Vec<Row> {
        ["none", "lock", "idempotency"]
            .into_iter()
            .map(|variant| {
                self.together(&format!("payment-{variant}"), 4);
                let charges = self.lines(&format!("charges-{variant}")).len() as u64;
                Row {
                    scenario: "payment",
                    variant,
                    protected: variant != "none",
                    anomalies: charges.saturating_sub(1),
                    detail: vec![("charges", charges.to_string())],
                }
            })
            .collect()
    }

    /// Scenario 4: five instances start together; the migration must run once.
    fn migration(&self) -> Vec<Row> {
        [("none", false), ("once", true)]
            .into_iter()
            .map(|(variant, protected)| {
                self.together(&format!("migrate-{variant}"), 5);
                let runs = self.lines(&format!("migrate-{variant}")).len() as u64;
                Row {
                    scenario: "migration",
                    variant,
                    protected,
                    anomalies: runs.saturating_sub(1),
                    detail: vec![("runs", runs.to_string())],
                }
            })
            .collect()
    }

    /// Scenario 3: ten instances of a per-second job for three seconds.
    fn cron(&self) -> Vec<Row> {
        [("none", false), ("lock", true)]
            .into_iter()
            .map(|(variant, protected)| {
                self.together(&format!("cron-{variant}"), 10);
                let mut per_fire: HashMap<String, u64> = HashMap::new();
                for line in self.lines(&format!("cron-{variant}")) {
                    *per_fire.entry(line).or_default() += 1;
                }
                let executions: u64 = per_fire.values().sum();
                let extra: u64 = per_fire.values().map(|n| n - 1).sum();
                Row {
                    scenario: "cron",
                    variant,
                    protected,
                    anomalies: extra,
                    detail: vec![
                        ("fire times", per_fire.len().to_string()),
                        ("executions", executions.to_string()),
                    ],
                }
            })
            .collect()
    }

    /// Scenario 2: five items, twenty buyers over four processes.
    async fn inventory(&self, store: &Store) -> Vec<Row> {
        let mut rows = Vec::new();
        #[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(unused_mut))]
        let mut variants = vec![("none", false), ("optimistic", true), ("lock", true)];
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        let database = for_update::server(&self.url);
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        if let Some(db) = &database {
            match for_update::stock(db, &self.run).await {
                Ok(()) => variants.push(("for-update", true)),
                Err(e) => eprintln!("lockward: skipping SELECT … FOR UPDATE: {e}"),
            }
        }
        for (variant, protected) in variants {
            let stock = format!("demo/{}/stock", self.run);
            if variant == "for-update" {
                // Stocked in its table above.
            } else if variant == "optimistic" {
                let items = Optimistic::new(store.clone());
                if let Err(e) = items.write(&stock, 0, "5").await {
                    eprintln!("lockward: cannot stock the demo's items: {e}");
                }
            } else {
                let _ = std::fs::write(self.dir.join(format!("stock-{variant}")), "5");
            }
            let took = self.together(&format!("stock-{variant}"), 4);
            let sold = self.lines(&format!("sales-{variant}")).len() as u64;
            let retries: u64 = self
                .lines("retries-optimistic")
                .iter()
                .filter(|_| variant == "optimistic")
                .filter_map(|l| l.parse::<u64>().ok())
                .sum();
            rows.push(Row {
                scenario: "inventory",
                variant,
                protected,
                anomalies: sold.saturating_sub(5),
                detail: vec![
                    ("sold", sold.to_string()),
                    ("oversold", sold.saturating_sub(5).to_string()),
                    ("retries", retries.to_string()),
                    (
                        "buyers/s",
                        format!("{:.0}", 20.0 / took.as_secs_f64().max(1e-6)),
                    ),
                ],
            });
        }
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        if let Some(db) = &database {
            for_update::clean(db, &self.run).await;
        }
        rows
    }

    /// Scenario 5: a price writer updates two prices that must match while
    /// three report readers read both; a read that sees them differ saw a
    /// half-done write. With the read-write lock readers still share.
    fn price_report(&self) -> Vec<Row> {
        [("none", false), ("rwlock", true)]
            .into_iter()
            .map(|(variant, protected)| {
                let _ = std::fs::write(self.dir.join("price-low"), "0");
                let _ = std::fs::write(self.dir.join("price-high"), "0");
                let mut children: Vec<Child> = (0..3)
                    .filter_map(|_| self.spawn(&format!("prices-reader-{variant}")))
                    .collect();
                children.extend(self.spawn(&format!("prices-writer-{variant}")));
                for mut c in children {
                    let _ = c.wait();
                }
                let events = self.lines(&format!("prices-reader-{variant}-events"));
                let torn = events.iter().filter(|l| l.ends_with(" torn")).count() as u64;
                let reads = events.iter().filter(|l| l.starts_with("out ")).count();
                let writes = self.lines(&format!("prices-writer-{variant}-writes")).len();
                Row {
                    scenario: "price report",
                    variant,
                    protected,
                    anomalies: torn,
                    detail: vec![
                        ("reads", reads.to_string()),
                        ("torn reads", torn.to_string()),
                        ("writes", writes.to_string()),
                        ("most readers at once", most_at_once(&events).to_string()),
                    ],
                }
            })
            .collect()
    }

    /// Scenario 6: the holder is stopped past its TTL while another takes the lock
    /// and writes; then it resumes and writes with its old fence.
    async fn paused_holder(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        #[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(unused_mut))]
        let mut variants = vec![("unfenced", false), ("fenced", true)];
        // On a database store, the account is also a row of a guarded table.
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        let guarded = match for_update::server(&self.url) {
            Some(db) => {
                let lock = format!("demo/{}/holder-db-guarded", self.run);
                match db_guard::prepare(&self.url, &db, &self.run, &lock).await {
                    Ok(()) => {
                        variants.push(("db-guarded", true));
                        Some(db)
                    }
                    Err(e) => {
                        eprintln!("lockward: demo: the guarded table could not be made: {e}");
                        None
                    }
                }
            }
            None => None,
        };
        for (variant, fenced) in variants {
            for file in ["ready", "go", "taken", "refused"] {
                let _ = std::fs::remove_file(self.dir.join(file));
            }
            let Some(mut holder) = self.spawn(&format!("holder-{variant}")) else {
                continue;
            };
            let ready = self.dir.join("ready");
            let until = Instant::now() + Duration::from_secs(10);
            while !ready.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            let pid = holder.id();
            // SAFETY: kill(2) on a child we started and have not reaped.
            unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
            let stopped = wait_stopped(pid);
            let began = Instant::now();
            if let Some(mut taker) = self.spawn(&format!("taker-{variant}")) {
                let _ = taker.wait();
            }
            let paused_for = began.elapsed().max(Duration::from_millis(600));
            std::thread::sleep(paused_for.saturating_sub(began.elapsed()));
            let _ = std::fs::write(self.dir.join("go"), "");
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            let _ = holder.wait();
            #[cfg(any(feature = "postgres", feature = "mysql"))]
            let in_db = match (&guarded, variant) {
                (Some(db), "db-guarded") => Some(db_guard::finish(&self.url, db, &self.run).await),
                _ => None,
            };
            #[cfg(not(any(feature = "postgres", feature = "mysql")))]
            let in_db: Option<String> = None;
            let last = match in_db {
                Some(value) => value,
                None => self.account(fenced).await,
            };
            let refused = self.lines("refused").len();
            // The anomaly: a newer holder wrote, and the stale write won.
            let taken = !self.lines("taken").is_empty();
            rows.push(Row {
                scenario: "paused holder",
                variant,
                protected: fenced,
                anomalies: u64::from(taken && last == "A"),
                detail: vec![
                    ("lock taken meanwhile", taken.to_string()),
                    ("stopped (state T)", stopped.to_string()),
                    ("paused for", format!("{paused_for:.1?}")),
                    ("final value", format!("{last:?}")),
                    ("late writes refused", refused.to_string()),
                ],
            });
        }
        rows
    }
}

impl Demo {
    /// What the paused-holder story's account holds at the end: the fenced
    /// register's value, or the plain file's ("" when neither was written).
    async fn account(&self, fenced: bool) -> String {
        let value = if fenced {
            match worker::register(&self.dir).await {
                Ok(r) => r
                    .read("account")
                    .await
                    .ok()
                    .flatten()
                    .map(|f| String::from_utf8_lossy(&f.value).into_owned()),
                Err(_) => None,
            }
        } else {
            std::fs::read_to_string(self.dir.join("account")).ok()
        };
        value.unwrap_or_default()
    }

    /// Scenario 6 again, on a Redis that fails over while the holder is
    /// paused (see `failover.rs`): the promoted replica never saw A's
    /// grant and grants the lock to B at once.
    async fn paused_holder_across_a_failover(&self) -> Result<Vec<Row>, String> {
        let mut rows = Vec::new();
        for (variant, fenced) in [("unfenced", false), ("fenced", true)] {
            for file in ["ready", "go", "taken", "refused", "account"] {
                let _ = std::fs::remove_file(self.dir.join(file));
            }
            if fenced {
                let _ = std::fs::remove_file(self.dir.join("resources.db"));
            }
            let servers = self.dir.join(format!("redis-{variant}"));
            std::fs::create_dir_all(&servers).map_err(|e| e.to_string())?;
            let mut pair = failover::Pair::start(&servers)?;
            pair.cut_the_replica_off();
            let role = format!("holder-{variant}");
            let mut holder = self
                .spawn_on(&pair.primary_url(), &role)
                .ok_or("cannot start a worker")?;
            let ready = self.dir.join("ready");
            let until = Instant::now() + Duration::from_secs(10);
            while !ready.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            let fence_a = std::fs::read_to_string(&ready).unwrap_or_default();
            let pid = holder.id();
            // SAFETY: kill(2) on a child we started and have not reaped.
            unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
            let stopped = wait_stopped(pid);
            let promoted = pair.fail_over();
            if let Some(mut taker) = self.spawn_on(&pair.replica_url(), &format!("taker-{variant}"))
            {
                let _ = taker.wait();
            }
            let _ = std::fs::write(self.dir.join("go"), "");
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            let _ = holder.wait();
            let last = self.account(fenced).await;
            let fence_b = self.lines("taken").first().cloned().unwrap_or_default();
            rows.push(Row {
                scenario: "paused holder, the store fails over",
                variant,
                protected: fenced,
                anomalies: u64::from(!fence_b.is_empty() && last == "A"),
                detail: vec![
                    ("stopped (state T)", stopped.to_string()),
                    ("replica promoted", promoted.to_string()),
                    ("A's fence (on the old primary)", fence_a.trim().to_string()),
                    ("B's fence (on the promoted replica)", fence_b),
                    ("final value", format!("{last:?}")),
                    (
                        "late writes refused",
                        self.lines("refused").len().to_string(),
                    ),
                ],
            });
        }
        Ok(rows)
    }
}

/// The most `in`…`out` intervals open at once, from `in NS` / `out NS …`
/// lines.
fn most_at_once(events: &[String]) -> usize {
    let mut edges: Vec<(u128, i32)> = events
        .iter()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let step = match words.next()? {
                "in" => 1,
                "out" => -1,
                _ => return None,
            };
            Some((words.next()?.parse().ok()?, step))
        })
        .collect();
    // At equal times an exit counts before an entry.
    edges.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        open += step;
        most = most.max(open);
    }
    most.max(0) as usize
}

/// Waits (up to a second) until `/proc` shows `pid` stopped: the proof
/// that the pause happened.
fn wait_stopped(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        if process_state(pid) == Some('T') {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// The state letter of `/proc/PID/stat` (`T` when stopped).
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn print_table(store: &Store, rows: &[Row], passed: bool) {
    println!("lockward demo on {}", store.address());
    let width = rows
        .iter()
        .map(|r| r.scenario.len())
        .max()
        .unwrap_or(0)
        .max(14);
    println!(
        "{:<width$} {:<12} {:<10} {:>9}  detail",
        "scenario", "variant", "protected", "anomalies"
    );
    for r in rows {
        let detail: Vec<String> = r.detail.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!(
            "{:<width$} {:<12} {:<10} {:>9}  {}",
            r.scenario,
            r.variant,
            if r.protected { "yes" } else { "no" },
            r.anomalies,
            detail.join(", ")
        );
    }
    println!(
        "{}",
        if passed {
            "every protected variant: no anomalies"
        } else {
            "FAILED: a protected variant showed anomalies"
        }
    );
}

fn print_json(store: &Store, rows: &[Row], passed: bool) {
    let scenarios: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let detail: serde_json::Map<String, serde_json::Value> = r
                .detail
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
                .collect();
            serde_json::json!({
                "scenario": r.scenario,
                "variant": r.variant,
                "protected": r.protected,
                "anomalies": r.anomalies,
                "detail": detail,
            })
        })
        .collect();
    let report = serde_json::json!({
        "store": store.address(),
        "scenarios": scenarios,
        "passed": passed,
    });
    println!("{report}");
}
