//! `lockward-chaos`: one chaos run against one backend; exit 0 only when
//! the verdict is `passed`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use lockward_chaos::client;
use lockward_chaos::run::{run, RunConfig};
use lockward_chaos::workload::Workload;

#[derive(Parser)]
#[command(
    name = "lockward-chaos",
    about = "Faults against a lockward backend, and a checker"
)]
struct Cli {
    /// The backend: sqlite, redis, redis-persistent, redis-sentinel, redlock, etcd, zookeeper, postgres, postgres-failover, mysql, mysql-failover, k8s.
    #[arg(long)]
    backend: Option<String>,
    /// How long the clients run.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Seed of the fault schedule (random by default).
    #[arg(long)]
    seed: Option<u64>,
    /// Give the fenced workload a register that ignores fences: the run
    /// must then fail (I4).
    #[arg(long)]
    mutant: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    command: Option<Sub>,
}

#[derive(Subcommand)]
enum Sub {
    /// One client process (started by the harness).
    #[command(hide = true)]
    Client {
        #[arg(long)]
        url: String,
        #[arg(long)]
        workload: String,
        #[arg(long)]
        index: u32,
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        until: u64,
    },
    /// The guarded workload's command, under `lockward run --fence-db`.
    #[command(hide = true)]
    GuardedWrite {
        #[arg(long)]
        db: String,
        #[arg(long)]
        client: u32,
        #[arg(long)]
        dir: PathBuf,
    },
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    lockward::duration::parse(text).map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Some(Sub::GuardedWrite { db, client, dir }) = &cli.command {
        return match lockward_chaos::guarded_client::write(db, *client, dir) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("lockward-chaos guarded-write: {e}");
                std::process::ExitCode::from(70)
            }
        };
    }
    if let Some(Sub::Client {
        url,
        workload,
        index,
        dir,
        until,
    }) = cli.command
    {
        let Some(workload) = Workload::parse(&workload) else {
            eprintln!("lockward-chaos: unknown workload {workload:?}");
            return std::process::ExitCode::from(64);
        };
        return match client::run(&url, workload, index, &dir, until).await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("lockward-chaos client: {e}");
                std::process::ExitCode::from(70)
            }
        };
    }
    let Some(backend) = cli.backend else {
        eprintln!(
            "lockward-chaos: --backend is required (one of {})",
            lockward_chaos::target::BACKENDS.join(", ")
        );
        return std::process::ExitCode::from(64);
    };
    let config = RunConfig {
        backend,
        duration: cli.duration,
        seed: cli.seed.unwrap_or_else(|| fastrand::u64(..)),
        mutant: cli.mutant,
        exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("lockward-chaos")),
    };
    match run(&config).await {
        Ok(report) => {
            if cli.json {
                println!("{}", serde_json::to_string(&report).unwrap_or_default());
            } else {
                print!("{}", lockward_chaos::report::table(&report));
            }
            if report.verdict == "passed" {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("lockward-chaos: {e}");
            std::process::ExitCode::from(70)
        }
    }
}
