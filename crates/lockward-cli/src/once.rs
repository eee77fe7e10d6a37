//! `lockward once KEY -- CMD`: CMD runs to success at most once, across all
//! instances and all time (the seed's migration).
//!
//! Under the lock `once/KEY`, an instance looks for the record `once/KEY`:
//! present, CMD ran already and the instance exits 0 without running it;
//! absent, it runs CMD and, only if CMD succeeded, writes the record before
//! it releases the lock. An instance that starts while CMD runs waits for
//! the lock, then finds the record. A failed run writes nothing, so the
//! next instance retries.

use std::time::Duration;

use lockward::{Name, Store};

use crate::exit;
use crate::run::{lock_options, run_under, Ended};

/// How long the record of a successful run is kept: "all time", within
/// what every store accepts for a record's TTL.
const KEEP_FOR: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// What `once` was asked to do.
pub struct OnceArgs {
    pub key: String,
    pub ttl: Duration,
    pub wait: Option<Duration>,
    pub grace: Option<Duration>,
    pub command: Vec<String>,
}

fn record_key(key: &str) -> lockward::Result<Name> {
    Name::new(format!("once/{key}"))
}

/// The record of `key`'s successful run, if there was one.
async fn ran(store: &Store, key: &Name) -> lockward::Result<Option<String>> {
    Ok(store
        .backend()
        .records(key.as_str())
        .await?
        .into_iter()
        .find(|(k, _)| k == key.as_str())
        .map(|(_, v)| v))
}

/// Runs CMD unless it succeeded before; returns lockward's exit status.
pub async fn once(store: &Store, args: OnceArgs) -> u8 {
    let (opts, grace) = match lock_options(args.ttl, args.grace, args.wait) {
        Ok(checked) => checked,
        Err(status) => return status,
    };
    let key = match record_key(&args.key) {
        Ok(key) => key,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    let guard = match store.acquire(key.as_str(), &opts).await {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    match ran(store, &key).await {
        Ok(Some(record)) => {
            eprintln!(
                "lockward: {} ran already ({record}); not running it again",
                args.key
            );
            let _ = guard.release().await;
            return 0;
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!("lockward: {e}");
            let _ = guard.release().await;
            return exit::for_error(&e);
        }
    }
    let env = vec![
        ("LOCKWARD_NAME", args.key.clone()),
        ("LOCKWARD_FENCE", guard.fence().to_string()),
        ("LOCKWARD_STORE", store.address()),
    ];
    let ended = run_under(&guard, &args.command, &env, grace).await;
    let status = match ended {
        Ended::Exited(0) => {
            // Recorded while the lock is still held, so no instance can
            // slip in between the run and the record.
            let record = format!(
                "by {} at {} with fence {}",
                crate::holder_label(),
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                guard.fence()
            );
            if guard.is_lost() {
                eprintln!("lockward: the lock was lost as CMD ended; not recording the run");
                exit::LOST
            } else if let Err(e) = store.backend().put_record(&key, &record, KEEP_FOR).await {
                eprintln!("lockward: CMD succeeded but its run could not be recorded: {e}");
                exit::for_error(&e)
            } else {
                0
            }
        }
        Ended::Exited(code) => {
            eprintln!(
                "lockward: CMD failed (status {code}); {} stays free for a retry",
                args.key
            );
            code
        }
        Ended::Failed(code) => code,
        Ended::Lost => exit::LOST,
    };
    let _ = guard.release().await;
    status
}

/// `lockward once --status KEY`: who ran it and when; exit 0 either way.
pub async fn status(store: &Store, key: &str) -> u8 {
    let key_name = match record_key(key) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    match ran(store, &key_name).await {
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
