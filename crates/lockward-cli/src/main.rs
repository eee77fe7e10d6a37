//! `lockward`: distributed locks from the shell and from any language.
//!
//! Each command is one file with its own arguments; this file parses the
//! command line, opens the store and dispatches.

mod bench;
mod cron;
mod demo;
mod doctor;
mod elect;
mod exit;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod fence;
mod fence_db;
mod holder;
mod lease;
mod log;
mod metrics;
mod once;
mod run;
mod sem;
#[cfg(feature = "serve")]
mod serve;
mod status;
mod stop;
mod supervise;
mod unlock;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lockward::Store;

const STORE_HELP: &str = "Store URL (memory://, sqlite://PATH, redis://HOST:PORT, …); \
default: $LOCKWARD_STORE, else the embedded sqlite://./.lockward/locks.db";

#[derive(Parser)]
#[command(name = "lockward", version, about = "Distributed locks with fencing tokens", after_help = exit::TABLE)]
struct Cli {
    #[arg(long, global = true, env = "LOCKWARD_STORE", help = STORE_HELP)]
    store: Option<String>,
    /// Serve metrics in the Prometheus text format at http://ADDR/metrics
    /// while the command runs (no authentication: bind to loopback or a
    /// private network), e.g. 127.0.0.1:9464.
    #[arg(long, global = true, env = "LOCKWARD_METRICS", value_name = "ADDR")]
    metrics: Option<String>,
    /// How log lines on stderr are written; which are written comes from
    /// LOCKWARD_LOG (else RUST_LOG), e.g. `lockward=debug`; default: warnings.
    #[arg(
        long,
        global = true,
        env = "LOCKWARD_LOG_FORMAT",
        value_enum,
        default_value_t
    )]
    log_format: log::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    #[command(after_help = exit::TABLE)]
    Run(run::RunArgs),
    #[command(after_help = exit::TABLE)]
    Elect(elect::ElectArgs),
    #[command(after_help = exit::TABLE)]
    Cron(cron::CronArgs),
    #[command(after_help = exit::TABLE)]
    Sem(sem::SemArgs),
    #[command(after_help = exit::TABLE)]
    Once(once::OnceArgs),
    CronLog(cron::CronLogArgs),
    Demo(demo::DemoArgs),
    Doctor(doctor::DoctorArgs),
    Bench(bench::BenchArgs),
    #[command(hide = true)]
    DemoWorker(demo::WorkerArgs),
    #[command(hide = true)]
    Keeper(supervise::keeper::KeeperArgs),
    #[command(hide = true)]
    Warden(supervise::warden::WardenArgs),
    Status(status::StatusArgs),
    #[command(after_help = exit::TABLE)]
    Unlock(unlock::UnlockArgs),
    /// Serve the store's locks to programs in any language over a local
    /// gRPC API (lockward.v1; see docs/serve.md).
    #[cfg(feature = "serve")]
    Serve(serve::ServeArgs),
    /// Guard database tables so the database itself refuses writes from
    /// a holder that lost its lock (see docs/fence-db.md).
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    #[command(after_help = exit::TABLE)]
    Fence(fence::FenceArgs),
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
    // The keeper and the warden are plain blocking code.
    match cli.command {
        Command::Keeper(args) => return ExitCode::from(supervise::keeper::keep(args)),
        Command::Warden(args) => return ExitCode::from(supervise::warden::ward(args)),
        _ => {}
    }
    let default_filter = match cli.command {
        Command::Demo(_) | Command::DemoWorker(_) => Some(log::DEMO_FILTER),
        _ => None,
    };
    if let Err(code) = log::init(cli.log_format, default_filter) {
        return ExitCode::from(code);
    }
    // The daemon serves many streams at once; every other command is one
    // client and runs on one thread.
    let runtime = match cli.command {
        #[cfg(feature = "serve")]
        Command::Serve(_) => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lockward: cannot start the runtime: {e}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    ExitCode::from(runtime.block_on(dispatch(cli)))
}

async fn dispatch(cli: Cli) -> u8 {
    // The demo runs on a fresh embedded store unless told otherwise; the
    // directory lives until the demo ends.
    let scratch = match (&cli.command, &cli.store) {
        (Command::Demo(_), None) => match tempfile::tempdir() {
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
    // Only the long-running commands serve metrics: the demo's workers and
    // the other short commands inherit LOCKWARD_METRICS and must not take
    // the port.
    let serves = matches!(
        cli.command,
        Command::Run(_) | Command::Elect(_) | Command::Cron(_) | Command::Sem(_) | Command::Once(_)
    );
    #[cfg(feature = "serve")]
    let serves = serves || matches!(cli.command, Command::Serve(_));
    if let (Some(addr), true) = (&cli.metrics, serves) {
        if let Err(code) = metrics::serve(addr) {
            return code;
        }
    }
    // The doctor reports an unreachable store as a finding.
    if let Command::Doctor(args) = cli.command {
        return doctor::doctor(&url, args).await;
    }
    // Guarding tables needs their database, not the store.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    if let Command::Fence(args) = cli.command {
        return fence::fence(args).await;
    }
    let store = match Store::open(&url).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    match cli.command {
        Command::Run(args) => run::run(&store, args).await,
        Command::Elect(args) => elect::elect(&store, args).await,
        Command::Cron(args) => cron::cron(&store, args).await,
        Command::CronLog(args) => cron::cron_log(&store, args).await,
        Command::Sem(args) => sem::sem(&store, args).await,
        Command::Once(args) => once::once(&store, args).await,
        Command::Demo(args) => demo::demo(&store, &url, args).await,
        Command::Bench(args) => bench::bench(&store, &url, args).await,
        Command::DemoWorker(args) => demo::worker(&store, &url, args).await,
        Command::Status(args) => status::status(&store, args).await,
        Command::Unlock(args) => unlock::unlock(&store, args).await,
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve::serve(&store, args).await,
        Command::Doctor(_) | Command::Keeper(_) | Command::Warden(_) => {
            unreachable!("handled before the store is opened")
        }
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        Command::Fence(_) => unreachable!("handled before the store is opened"),
    }
}
