//! `lockward once KEY -- CMD`: CMD runs to success at most once, across all
//! instances and all time (a migration, a backfill).
//!
//! Built on the idempotency recipe in waiting mode, in the namespace
//! `once`: an instance claims `once/KEY` (waiting while another instance
//! runs CMD), finds the record of an earlier success and exits 0 without
//! running, or runs CMD and, only if CMD succeeded, stores the record
//! before it releases the lock. A failed run stores nothing, so the next
//! instance retries. With `--no-wait`, an instance that finds CMD running
//! elsewhere exits 75 at once.

use std::time::Duration;

use lockward::recipe::{Begun, Idempotency};
use lockward::Store;

use crate::exit;
use crate::lease::LeaseArgs;
use crate::supervise::{run_under, Ended};

/// How long the record of a successful run is kept on stores that cannot
/// keep it forever (memory, Redis, etcd, ZooKeeper): "all time" as nearly
/// as they allow. SQLite, PostgreSQL and MySQL keep it forever.
const KEEP_FOR: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Run CMD to success at most once for KEY, across all instances and all time.
#[derive(clap::Args)]
pub struct OnceArgs {
    /// The key (e.g. a migration's name).
    pub key: String,
    /// Show who ran KEY and when, instead of running anything.
    #[arg(long, conflicts_with = "command")]
    pub status: bool,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The command and its arguments, after `--`.
    /// Claim the fence in this PostgreSQL or MySQL database (tables
    /// guarded with `lockward fence install`) before CMD starts, and pass
    /// it to CMD (see `run --fence-db`).
    #[arg(long, env = "LOCKWARD_FENCE_DB", value_name = "URL")]
    pub fence_db: Option<String>,
    #[arg(last = true, value_name = "CMD", required_unless_present = "status")]
    pub command: Vec<String>,
}

fn keys(store: &Store) -> Idempotency {
    let keys = Idempotency::new(store.clone()).namespace("once");
    if store.capabilities().permanent_records {
        keys.permanent()
    } else {
        keys.retention(KEEP_FOR)
    }
}

/// Runs CMD unless it succeeded before, or shows KEY's record with
/// `--status`; returns lockward's exit status.
pub async fn once(store: &Store, args: OnceArgs) -> u8 {
    if args.status {
        return status(store, &args.key).await;
    }
    let (opts, grace) = match args.lease.options(store) {
        Ok(checked) => checked,
        Err(status) => return status,
    };
    let waiting = !args.lease.no_wait;
    let ttl = opts.get_ttl();
    let begun = keys(store)
        .lock_options(opts)
        .waiting(waiting)
        .begin(&args.key)
        .await;
    let claim = match begun {
        Ok(Begun::Claimed(claim)) => *claim,
        Ok(Begun::Stored(record)) => {
            eprintln!(
                "lockward: {} ran already ({record}); not running it again",
                args.key
            );
            return 0;
        }
        Ok(Begun::InProgress) => {
            eprintln!("lockward: {} is running elsewhere (--no-wait)", args.key);
            return exit::NOT_ACQUIRED;
        }
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    let fence = claim.guard().fence();
    let mut env = vec![
        ("LOCKWARD_NAME", args.key.clone()),
        ("LOCKWARD_FENCE", fence.to_string()),
        ("LOCKWARD_STORE", store.address()),
    ];
    if let Some(db) = &args.fence_db {
        let fences = [(args.key.as_str(), fence)];
        match crate::fence_db::claim(db, &fences, ttl / 3, false).await {
            Ok(fenced) => env.extend(fenced),
            Err(status) => {
                let _ = claim.abandon().await;
                return status;
            }
        }
    }
    match run_under(claim.guard(), &args.command, &env, grace).await {
        Ended::Exited(0) => {
            let record = format!(
                "by {} at {} with fence {fence}",
                crate::holder::label(),
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            );
            match claim.complete(&record).await {
                Ok(()) => 0,
                Err(e @ lockward::Error::Lost { .. }) => {
                    eprintln!(
                        "lockward: the lock was lost as CMD ended; not recording the run: {e}"
                    );
                    exit::LOST
                }
                Err(e) => {
                    eprintln!("lockward: CMD succeeded but its run could not be recorded: {e}");
                    exit::for_error(&e)
                }
            }
        }
        ended => {
            let _ = claim.abandon().await;
            match ended {
                Ended::Exited(code) => {
                    eprintln!(
                        "lockward: CMD failed (status {code}); {} stays free for a retry",
                        args.key
                    );
                    code
                }
                Ended::Failed(code) => code,
                Ended::Lost | Ended::Stopped => exit::LOST,
            }
        }
    }
}

/// `lockward once --status KEY`: who ran it and when; exit 0 either way.
async fn status(store: &Store, key: &str) -> u8 {
    match keys(store).result(key).await {
        Ok(Some(record)) => {
            println!("{key}: ran {record}");
            0
        }
        Ok(None) => {
            println!("{key}: not run yet");
            0
        }
        Err(e) => {
            eprintln!("lockward: {e}");
            exit::for_error(&e)
        }
    }
}
