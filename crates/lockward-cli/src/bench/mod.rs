//! `lockward bench`: the store's figures, each beside the store's own floor
//! measured in the same run.

mod failover;
mod report;
mod svg;

use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use lockward::{Store, StoreUrl};
use lockward_bench::{self as bench, Latencies, Scale, Throughput};

use crate::exit;
use crate::lease::{parse_duration, parse_duration_or_zero};
pub use failover::Failover;

/// Measure the store: uncontended latency, throughput with many clients, handoff, fairness, each beside the store's floor.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Client counts to measure throughput with.
    #[arg(long, default_value = "1,16,256", value_delimiter = ',')]
    pub clients: Vec<usize>,
    /// Clients on one name (`same`), each on its own (`distinct`), or `both`.
    #[arg(long, default_value = "both")]
    pub names: String,
    /// How long each measurement runs.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Locks to hold at once on distinct names for the scale figures (0 skips).
    #[arg(long, default_value_t = 10_000)]
    pub scale: usize,
    /// Unrelated records to add before timing idempotency, run-once and
    /// rate-limit checks again, to show they cost the same (0 skips).
    #[arg(long, default_value_t = 0)]
    pub keyspace: usize,
    /// Permits of the semaphore timed at 1 and 64 clients (0 skips).
    #[arg(long, default_value_t = 100_000)]
    pub semaphore: u32,
    /// Holders of one permit each to take before timing the semaphore's
    /// acquire+release again, against an empty one (0 skips).
    #[arg(long, default_value_t = 0)]
    pub semaphore_holders: usize,
    /// Handles timed reading a read-write lock together, against as many
    /// taking a plain lock on one name (0 skips the read-write figures).
    #[arg(long, default_value_t = 16)]
    pub rw_clients: usize,
    /// The election lease for the failover figures (0 skips).
    #[arg(long, default_value = "2s", value_parser = parse_duration_or_zero)]
    pub failover_lease: Duration,
    /// Open this many sessions of another program, each listening on an
    /// unrelated channel and left idle, for the whole run (PostgreSQL
    /// only): shows whether lockward's rates depend on what else listens in
    /// the database.
    #[arg(long, default_value_t = 0)]
    pub idle_listeners: usize,
    /// Also draw latency by percentile and throughput by clients to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// Everything one run measured.
pub struct Results {
    pub store: String,
    pub duration: Duration,
    /// One round trip of the store's cheapest write: the median of the
    /// round trips taken between the uncontended cycles.
    pub floor: Option<Duration>,
    pub cycles: Latencies,
    pub handoffs: Latencies,
    pub throughput: Vec<Throughput>,
    pub scale: Option<Result<Scale, String>>,
    pub failover: Option<Result<Failover, String>>,
    pub failover_lease: Duration,
    /// Point operations with `keyspace` unrelated records, against without.
    pub keyspace: Option<(usize, Result<Vec<bench::PointCost>, String>)>,
    /// Semaphore permits, and cycles/s at 1 and 64 clients.
    pub semaphore: Option<(u32, Result<SemaphoreRates, String>)>,
    /// Whether the store keeps semaphores natively.
    pub semaphore_native: bool,
    /// Semaphore holders, and the cycle's median beside them and without.
    pub semaphore_crowd: Option<(usize, Result<bench::Crowd, String>)>,
    /// Read-write lock handles, and what was measured with them.
    pub rw: Option<(usize, Result<RwFigures, String>)>,
    /// With `replicas=` in the URL: the median cycle with it and without
    /// (the same URL less it), taken in turn.
    pub replicas: Option<Result<(Duration, Duration), String>>,
    /// Idle listening sessions of another program open during the run.
    pub idle_listeners: usize,
}

/// A read-write lock against a plain lock: uncontended medians of a plain
/// cycle, a read and a write; then cycles/s of many readers sharing and of
/// as many plain holders queueing (each holding [`RW_HOLD`]).
pub struct RwFigures {
    pub plain: Duration,
    pub read: Duration,
    pub write: Duration,
    pub readers_per_s: f64,
    pub plain_per_s: f64,
}

/// How long each timed reader or plain holder holds.
pub const RW_HOLD: Duration = Duration::from_millis(5);

/// Acquire+release cycles timed on a semaphore, empty and beside holders.
const CROWD_SAMPLES: usize = 300;

/// Semaphore cycles/s at 1 and at 64 clients.
pub type SemaphoreRates = (f64, f64);

pub async fn bench(store: &Store, url: &str, args: BenchArgs) -> u8 {
    let parsed = match StoreUrl::parse(url) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::USAGE;
        }
    };
    let same = match args.names.as_str() {
        "same" => vec![true],
        "distinct" => vec![false],
        "both" => vec![true, false],
        other => {
            eprintln!("lockward: --names {other:?}: use same, distinct or both");
            return exit::USAGE;
        }
    };
    if args.clients.contains(&0) {
        eprintln!("lockward: --clients: a client count must be at least 1");
        return exit::USAGE;
    }
    // Fail before a long run, not after it, when the plot cannot be written.
    if let Some(path) = &args.svg {
        if let Err(e) = std::fs::write(path, "") {
            eprintln!("lockward: --svg {}: {e}", path.display());
            return exit::USAGE;
        }
    }
    let _listeners = match idle_listeners(&parsed, args.idle_listeners).await {
        Ok(sessions) => sessions,
        Err(e) => {
            eprintln!("lockward: --idle-listeners: {e}");
            return exit::USAGE;
        }
    };
    let prefix = format!("lockward-bench/{:x}", fastrand::u64(..));
    let steps = 3 + args.clients.len() * same.len() + 2;
    let bar = progress_bar(steps as u64);

    bar.set_message("the store's floor");
    let probe = bench::FloorProbe::connect(&parsed).await;
    bar.inc(1);
    bar.set_message("uncontended cycles beside the floor");
    let cycle_name = format!("{prefix}/cycle");
    let (cycles, floor) =
        match bench::cycles_beside_floor(store, probe, &cycle_name, args.duration).await {
            Ok(measured) => measured,
            Err(e) => {
                bar.finish_and_clear();
                eprintln!("lockward: {e}");
                return exit::for_error(&e);
            }
        };
    let floor = (!floor.is_empty()).then(|| floor.quantile(0.5));
    bar.inc(1);
    bar.set_message("handoff");
    let handoffs = match Store::open(url).await {
        Ok(other) => bench::handoffs(store, &other, &format!("{prefix}/handoff"), 100).await,
        Err(e) => Err(e),
    };
    let handoffs = match handoffs {
        Ok(h) => h,
        Err(e) => {
            bar.finish_and_clear();
            eprintln!("lockward: handoff: {e}");
            return exit::for_error(&e);
        }
    };
    bar.inc(1);
    let replicas = match without_replicas(url) {
        Some(plain) => {
            bar.set_message("cycles with and without replicas=");
            let name = format!("{prefix}/replicas");
            let measured = async {
                let plain = Store::open(&plain).await?;
                bench::paired_cycles(store, &plain, &name, args.duration).await
            };
            Some(
                measured
                    .await
                    .map(|(with, without)| (with.quantile(0.5), without.quantile(0.5)))
                    .map_err(|e| e.to_string()),
            )
        }
        None => None,
    };
    let mut throughput = Vec::new();
    for &n in &args.clients {
        for &same_name in &same {
            let names = if same_name {
                "one name"
            } else {
                "distinct names"
            };
            bar.set_message(format!("{n} clients, {names}"));
            let run =
                bench::throughput(|| Store::open(url), &prefix, n, same_name, args.duration).await;
            match run {
                Ok(t) => throughput.push(t),
                Err(e) => bar.println(format!("lockward: {n} clients: {e}")),
            }
            bar.inc(1);
        }
    }
    bar.set_message(format!("{} locks held at once", args.scale));
    let scale = (args.scale > 0).then_some(());
    let scale = match scale {
        Some(()) => Some(
            bench::scale(
                || Store::open(url),
                &parsed,
                &prefix,
                args.scale,
                32,
                args.duration,
            )
            .await
            .map_err(|e| e.to_string()),
        ),
        None => None,
    };
    bar.inc(1);
    let semaphore = if args.semaphore == 0 {
        None
    } else {
        bar.set_message(format!("a semaphore of {} permits", args.semaphore));
        let name = format!("{prefix}/semaphore");
        let mut rates = Vec::new();
        for clients in [1, 64] {
            rates.push(
                bench::semaphore(
                    || Store::open(url),
                    &name,
                    args.semaphore,
                    clients,
                    args.duration,
                )
                .await
                .map_err(|e| e.to_string()),
            );
        }
        let both = match (rates.remove(0), rates.remove(0)) {
            (Ok(one), Ok(many)) => Ok((one, many)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        Some((args.semaphore, both))
    };
    let semaphore_crowd = if args.semaphore_holders == 0 || args.semaphore == 0 {
        None
    } else {
        bar.set_message(format!(
            "a semaphore of {} permits beside {} holders",
            args.semaphore, args.semaphore_holders
        ));
        let crowd = bench::semaphore_crowd(
            &parsed,
            store,
            &format!("{prefix}/semaphore-crowd"),
            args.semaphore,
            args.semaphore_holders,
            CROWD_SAMPLES,
        )
        .await
        .map_err(|e| e.to_string());
        Some((args.semaphore_holders, crowd))
    };
    let rw = if args.rw_clients == 0 {
        None
    } else {
        bar.set_message(format!(
            "a read-write lock: {} readers against {} plain holders",
            args.rw_clients, args.rw_clients
        ));
        let prefix = format!("{prefix}/rw");
        let figures = async {
            let costs = bench::rw_costs(store, &prefix, 200).await?;
            let (readers_per_s, plain_per_s) = bench::rw_sharing(
                || Store::open(url),
                &prefix,
                args.rw_clients,
                RW_HOLD,
                args.duration,
            )
            .await?;
            Ok::<_, lockward::Error>(RwFigures {
                plain: costs.plain.quantile(0.5),
                read: costs.read.quantile(0.5),
                write: costs.write.quantile(0.5),
                readers_per_s,
                plain_per_s,
            })
        }
        .await
        .map_err(|e| e.to_string());
        Some((args.rw_clients, figures))
    };
    let keyspace = if args.keyspace == 0 {
        None
    } else {
        bar.set_message(format!(
            "point operations beside {} unrelated keys",
            args.keyspace
        ));
        let costs = bench::keyspace(store, &format!("{prefix}/keyspace"), args.keyspace, 200)
            .await
            .map_err(|e| e.to_string());
        Some((args.keyspace, costs))
    };
    bar.set_message("leader failover");
    let failover = if args.failover_lease.is_zero() {
        None
    } else if parsed == StoreUrl::Memory {
        Some(Err(
            "memory:// lives in one process; failover needs two".to_string()
        ))
    } else {
        // A ZooKeeper lease cannot end before its session does.
        let settle = args.failover_lease * 3 + Duration::from_secs(40);
        let name = format!("{prefix}/election");
        Some(failover::failover(url, &name, args.failover_lease, settle).await)
    };
    bar.inc(1);
    bar.finish_and_clear();

    let results = Results {
        store: store.address().to_string(),
        duration: args.duration,
        floor,
        cycles,
        handoffs,
        throughput,
        scale,
        failover,
        failover_lease: args.failover_lease,
        keyspace,
        semaphore,
        semaphore_native: store.capabilities().native_semaphore,
        semaphore_crowd,
        rw,
        replicas,
        idle_listeners: args.idle_listeners,
    };
    if let Some(path) = &args.svg {
        if let Err(e) = std::fs::write(path, report::svg(&results)) {
            eprintln!("lockward: cannot write {}: {e}", path.display());
            return exit::SOFTWARE;
        }
    }
    if args.json {
        println!("{}", report::json(&results));
    } else {
        print!("{}", report::table(&results));
    }
    0
}

/// `url` without its `replicas=` and `replicas_timeout=`, when it has them.
fn without_replicas(url: &str) -> Option<String> {
    let (base, query) = url.split_once('?')?;
    let is_replicas = |p: &&str| p.starts_with("replicas=") || p.starts_with("replicas_timeout=");
    let params: Vec<&str> = query.split('&').collect();
    if !params.iter().any(is_replicas) {
        return None;
    }
    let kept: Vec<&str> = params.into_iter().filter(|p| !is_replicas(p)).collect();
    Some(match kept.as_slice() {
        [] => base.to_string(),
        _ => format!("{base}?{}", kept.join("&")),
    })
}

/// Opens `n` idle listening sessions of another program on the server of
/// `url`, kept open while the value lives.
async fn idle_listeners(url: &StoreUrl, n: usize) -> Result<Vec<Box<dyn std::any::Any>>, String> {
    if n == 0 {
        return Ok(Vec::new());
    }
    match url {
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(pg) => {
            let sessions = lockward::backend::postgres::side::idle_listeners(pg, n)
                .await
                .map_err(|e| e.to_string())?;
            Ok(sessions
                .into_iter()
                .map(|s| Box::new(s) as Box<dyn std::any::Any>)
                .collect())
        }
        _ => Err("only PostgreSQL has listeners that other programs share".to_string()),
    }
}

/// A bar on stderr; hidden when stderr is not a terminal.
fn progress_bar(steps: u64) -> ProgressBar {
    let bar = ProgressBar::new(steps);
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed:>4} {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
