//! `lockward status [PREFIX]`: held locks, elections and cron jobs, once or
//! as a live view (`--watch`).

mod snapshot;
mod watch;

use std::time::Duration;

use lockward::Store;

use crate::exit;

/// List held locks (name, kind, holder, fence, time left, waiters),
/// elections with their leader, and cron jobs with their last and next fire
/// time.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// Only names that start with PREFIX.
    #[arg(default_value = "")]
    pub prefix: String,
    /// Print JSON for scripts (once: the held locks; with --watch: one
    /// object per refresh, with locks, elections and cron jobs).
    #[arg(long)]
    pub json: bool,
    /// Keep the view up to date until q or Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// How often --watch reads the store again.
    #[arg(long, default_value = "1s", value_parser = crate::lease::parse_duration)]
    pub interval: Duration,
}

/// Prints the status once, or keeps printing it with `--watch`.
pub async fn status(store: &Store, args: StatusArgs) -> u8 {
    if args.interval < Duration::from_millis(100) {
        eprintln!("lockward: --interval must be at least 100ms");
        return exit::USAGE;
    }
    if args.watch {
        return watch::watch(store, &args.prefix, args.interval, args.json).await;
    }
    let snapshot = match snapshot::take(store, &args.prefix).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    if args.json {
        // Held locks only, as this has always printed.
        println!(
            "{}",
            serde_json::to_string_pretty(&snapshot.locks).expect("rows serialise")
        );
        return 0;
    }
    for line in snapshot::render(&snapshot, &store.address()) {
        println!("{line}");
    }
    0
}
