//! `lockward`: distributed locks from the shell and from any language.

mod bench;
mod child;
mod cron;
mod demo;
mod doctor;
mod elect;
mod exit;
mod once;
mod run;
mod sem;
mod status;
mod stop;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use lockward::Store;

const STORE_HELP: &str = "Store URL (memory://, sqlite://PATH, redis://HOST:PORT, …); \
default: $LOCKWARD_STORE, else the embedded sqlite://./.lockward/locks.db";

#[derive(Parser)]
#[command(name = "lockward", version, about = "Distributed locks with fencing tokens", after_help = exit::TABLE)]
struct Cli {
    #[arg(long, global = true, env = "LOCKWARD_STORE", help = STORE_HELP)]
    store: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run CMD while holding lock NAME, renewing it; CMD is stopped if the lock is lost.
    #[command(after_help = exit::TABLE)]
    Run {
        /// The lock's name.
        name: String,
        /// Lease TTL on the store (renewed every TTL/3 while CMD runs).
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        ttl: Duration,
        /// Wait at most this long for the lock (default: wait forever).
        #[arg(long, value_parser = parse_duration, conflicts_with = "no_wait")]
        wait: Option<Duration>,
        /// Do not wait: exit 75 at once if the lock is held.
        #[arg(long)]
        no_wait: bool,
        /// Between SIGTERM and SIGKILL when the lock is lost (default TTL/4).
        #[arg(long, value_parser = parse_duration)]
        grace: Option<Duration>,
        /// The command and its arguments, after `--`; run directly, not by a shell.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run CMD only while this instance leads the election NAME.
    #[command(after_help = exit::TABLE)]
    Elect {
        /// The election's name.
        name: String,
        /// This candidate's identity, shown as the leader (default host:pid).
        #[arg(long)]
        identity: Option<String>,
        /// How long the store keeps the leader's lease without renewal.
        #[arg(long, default_value = "15s", value_parser = parse_duration)]
        lease: Duration,
        /// How long the leader keeps leading while renewals fail (< lease).
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        renew_deadline: Duration,
        /// How often the leader renews (< renew deadline).
        #[arg(long, default_value = "2s", value_parser = parse_duration)]
        retry: Duration,
        /// The command and its arguments, after `--`; `LOCKWARD_EPOCH` holds the epoch.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run CMD at each fire time of EXPR on exactly one of the instances running this line.
    #[command(after_help = exit::TABLE)]
    Cron {
        /// The job's name.
        name: String,
        /// Cron expression: 5 fields, or 6 with a leading seconds field.
        expression: String,
        /// IANA time zone of the expression.
        #[arg(long, default_value = "UTC")]
        tz: String,
        /// Hold the lock at least this long after the start.
        #[arg(long, default_value = "0s", value_parser = parse_duration_or_zero)]
        lock_at_least: Duration,
        /// Hold it at most this long: CMD is stopped then.
        #[arg(long, default_value = "10m", value_parser = parse_duration)]
        lock_at_most: Duration,
        /// The command and its arguments, after `--`; `LOCKWARD_FIRE_TIME` holds the fire time.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run CMD while holding one of N permits of NAME: at most N runs at once across hosts.
    #[command(after_help = exit::TABLE)]
    Sem {
        /// The semaphore's name.
        name: String,
        /// How many runs may go on at once (1 to 64).
        #[arg(short = 'n', long = "permits")]
        permits: u32,
        /// Lease TTL of the permit on the store (renewed every TTL/3 while CMD runs).
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        ttl: Duration,
        /// Wait at most this long for a permit (default: wait forever).
        #[arg(long, value_parser = parse_duration, conflicts_with = "no_wait")]
        wait: Option<Duration>,
        /// Do not wait: exit 75 at once if every permit is held.
        #[arg(long)]
        no_wait: bool,
        /// Between SIGTERM and SIGKILL when the permit is lost (default TTL/4).
        #[arg(long, value_parser = parse_duration)]
        grace: Option<Duration>,
        /// The command and its arguments, after `--`; `LOCKWARD_PERMIT` holds the slot.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run CMD to success at most once for KEY, across all instances and all time.
    #[command(after_help = exit::TABLE)]
    Once {
        /// The key (e.g. a migration's name).
        key: String,
        /// Show who ran KEY and when, instead of running anything.
        #[arg(long, conflicts_with = "command")]
        status: bool,
        /// Lease TTL of the lock on the store (renewed every TTL/3 while CMD runs).
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        ttl: Duration,
        /// Wait at most this long for a running instance (default: wait forever).
        #[arg(long, value_parser = parse_duration)]
        wait: Option<Duration>,
        /// Between SIGTERM and SIGKILL when the lock is lost (default TTL/4).
        #[arg(long, value_parser = parse_duration)]
        grace: Option<Duration>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, value_name = "CMD", required_unless_present = "status")]
        command: Vec<String>,
    },
    /// Show the ledger of a cron job, with missed fire times marked.
    CronLog {
        /// The job's name.
        name: String,
        /// The job's cron expression, if not the one its instances recorded.
        expression: Option<String>,
        /// IANA time zone of EXPRESSION.
        #[arg(long, default_value = "UTC")]
        tz: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Run the seeds' scenarios (payment, inventory, cron, migration, paused holder) as real processes, without and with protection.
    #[command(
        after_help = "Exit status: 0 when every protected variant shows no anomaly, 1 otherwise.\nWithout --store (or $LOCKWARD_STORE) it runs on a fresh embedded SQLite store."
    )]
    Demo {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Check the store: reachable, version, round trip, clock offset, settings that weaken guarantees, and a short mutual-exclusion and fence probe.
    #[command(
        after_help = "Exit status: 0 when no finding is an error; 69 when the store cannot be reached; 1 for other errors."
    )]
    Doctor {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Measure the store: uncontended latency, throughput with many clients, handoff, fairness, each beside the store's floor.
    Bench {
        /// Client counts to measure throughput with.
        #[arg(long, default_value = "1,16,256", value_delimiter = ',')]
        clients: Vec<usize>,
        /// Clients on one name (`same`), each on its own (`distinct`), or `both`.
        #[arg(long, default_value = "both")]
        names: String,
        /// How long each measurement runs.
        #[arg(long, default_value = "3s", value_parser = parse_duration)]
        duration: Duration,
        /// Locks to hold at once on distinct names for the scale figures (0 skips).
        #[arg(long, default_value_t = 10_000)]
        scale: usize,
        /// The election lease for the failover figures (0 skips).
        #[arg(long, default_value = "2s", value_parser = parse_duration_or_zero)]
        failover_lease: Duration,
        /// Also draw latency by percentile and throughput by clients to FILE.
        #[arg(long, value_name = "FILE")]
        svg: Option<std::path::PathBuf>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// One process of `lockward demo` (internal).
    #[command(hide = true)]
    DemoWorker {
        role: String,
        dir: std::path::PathBuf,
        run: String,
    },
    /// List held locks: name, holder, fence, time left, waiters.
    Status {
        /// Only locks whose name starts with PREFIX.
        #[arg(default_value = "")]
        prefix: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    lockward::duration::parse(text).map_err(|e| e.to_string())
}

fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    if text.trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// `host:pid`, shown by `status` as the holder.
pub fn holder_label() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // within it or truncates.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let host = if rc == 0 {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "unknown-host".into()
    };
    format!("{host}:{}", std::process::id())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            return ExitCode::from(if usage { exit::USAGE } else { 0 });
        }
    };
    // One thread: CMD is forked from the main thread, which lives as long
    // as lockward, so the parent-death signal fires only when lockward dies.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lockward: cannot start the runtime: {e}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    ExitCode::from(runtime.block_on(dispatch(cli)))
}

async fn dispatch(cli: Cli) -> u8 {
    // The demo runs on a fresh embedded store unless told otherwise.
    let scratch = match (&cli.command, &cli.store) {
        (Command::Demo { .. }, None) => match tempfile::tempdir() {
            Ok(dir) => Some(dir),
            Err(e) => {
                eprintln!("lockward: cannot make a directory for the demo's store: {e}");
                return exit::SOFTWARE;
            }
        },
        _ => None,
    };
    let url = match (&cli.store, &scratch) {
        (Some(url), _) => url.clone(),
        (None, Some(dir)) => format!("sqlite://{}", dir.path().join("locks.db").display()),
        (None, None) => format!("sqlite://{}", lockward::DEFAULT_SQLITE_PATH),
    };
    if let Command::Doctor { json } = cli.command {
        return doctor::doctor(&url, json).await;
    }
    let store = match Store::open(&url).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    match cli.command {
        Command::Run {
            name,
            ttl,
            wait,
            no_wait,
            grace,
            command,
        } => {
            run::run(
                &store,
                run::RunArgs {
                    name,
                    ttl,
                    wait,
                    no_wait,
                    grace,
                    command,
                },
            )
            .await
        }
        Command::Elect {
            name,
            identity,
            lease,
            renew_deadline,
            retry,
            command,
        } => {
            let config = lockward::recipe::ElectionConfig {
                lease_duration: lease,
                renew_deadline,
                retry_period: retry,
            };
            elect::elect(
                &store,
                elect::ElectArgs {
                    name,
                    identity,
                    config,
                    command,
                },
            )
            .await
        }
        Command::Cron {
            name,
            expression,
            tz,
            lock_at_least,
            lock_at_most,
            command,
        } => {
            let options = lockward::recipe::cron::CronOptions {
                lock_at_least_for: lock_at_least,
                lock_at_most_for: lock_at_most,
                ..Default::default()
            };
            cron::cron(
                &store,
                cron::CronArgs {
                    name,
                    expression,
                    zone: tz,
                    options,
                    command,
                },
            )
            .await
        }
        Command::CronLog {
            name,
            expression,
            tz,
            json,
        } => cron::cron_log(&store, &name, expression.as_deref(), &tz, json).await,
        Command::Sem {
            name,
            permits,
            ttl,
            wait,
            no_wait,
            grace,
            command,
        } => {
            sem::sem(
                &store,
                sem::SemArgs {
                    name,
                    permits,
                    ttl,
                    wait,
                    no_wait,
                    grace,
                    command,
                },
            )
            .await
        }
        Command::Once {
            key, status: true, ..
        } => once::status(&store, &key).await,
        Command::Once {
            key,
            ttl,
            wait,
            grace,
            command,
            ..
        } => {
            once::once(
                &store,
                once::OnceArgs {
                    key,
                    ttl,
                    wait,
                    grace,
                    command,
                },
            )
            .await
        }
        Command::Demo { json } => demo::demo(&store, &url, json).await,
        Command::Doctor { .. } => unreachable!("handled before the store is opened"),
        Command::Bench {
            clients,
            names,
            duration,
            scale,
            failover_lease,
            svg,
            json,
        } => {
            bench::bench(
                &store,
                &url,
                bench::BenchArgs {
                    clients,
                    names,
                    duration,
                    scale,
                    failover_lease,
                    svg,
                    json,
                },
            )
            .await
        }
        Command::DemoWorker { role, dir, run } => {
            match demo::worker::work(&store, &url, &role, &dir, &run).await {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("lockward demo-worker {role}: {e}");
                    exit::SOFTWARE
                }
            }
        }
        Command::Status { prefix, json } => status::status(&store, &prefix, json).await,
    }
}
