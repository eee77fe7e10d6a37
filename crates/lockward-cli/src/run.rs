//! `lockward run NAME [NAME…] -- CMD ARGS…`: CMD runs only while the lock
//! (or every one of the locks) is held.

use std::time::{Duration, Instant};

use lockward::recipe::RwLock;
use lockward::{Guard, LockOptions, MultiGuard, Store};

use crate::exit;
use crate::lease::LeaseArgs;
use crate::supervise::{finish, never, run_while};

/// Run CMD while holding lock NAME (or every NAME, taken all or nothing), renewing it; CMD is stopped if a lock is lost.
#[derive(clap::Args)]
#[command(after_long_help = MULTI_HELP)]
pub struct RunArgs {
    /// The lock's name; several names are taken all or nothing, in one
    /// order whatever order they are given in, so two runs that name the
    /// same locks in different orders cannot deadlock.
    #[arg(required = true, num_args = 1.., value_name = "NAME")]
    pub names: Vec<String>,
    /// Take the read side of NAME: any number of shared runs hold it
    /// together, and a run without --shared (the write side) waits for
    /// them; a waiting write side goes before shared runs that come after.
    #[arg(long)]
    pub shared: bool,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Claim each lock's fence in this PostgreSQL or MySQL/MariaDB
    /// database (whose tables `lockward fence install` guards) before CMD
    /// starts, and pass it to CMD (PostgreSQL: in PGOPTIONS; MySQL: the
    /// init command in LOCKWARD_FENCE_DB_INIT), so the database refuses
    /// CMD's writes once another holder has claimed a newer fence. A claim
    /// that fails or waits past TTL/3 means CMD never starts.
    #[arg(long, env = "LOCKWARD_FENCE_DB", value_name = "URL")]
    pub fence_db: Option<String>,
    /// With --fence-db: when a claim still waits halfway through, end the
    /// sessions holding it up (their open transactions under the old fence
    /// roll back) instead of giving up.
    #[arg(long, requires = "fence_db")]
    pub end_stale: bool,
    /// The command and its arguments, after `--`; run directly, not by a shell.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

const MULTI_HELP: &str = "\
With several names, CMD gets LOCKWARD_NAME_1, LOCKWARD_FENCE_1, LOCKWARD_NAME_2, \
LOCKWARD_FENCE_2, … in the order the names were given (LOCKWARD_NAME and LOCKWARD_FENCE \
are the first's); the wait (--wait) is one, over every name; CMD is stopped when any one \
lock is lost.";

/// Takes the lock (or every lock), runs CMD under it, and returns
/// lockward's exit status.
pub async fn run(store: &Store, args: RunArgs) -> u8 {
    let (opts, grace) = match args.lease.options(store) {
        Ok(checked) => checked,
        Err(status) => return status,
    };
    if args.shared {
        if args.fence_db.is_some() {
            // Readers hold together, each with its own fence; a guard
            // admits one fence at a time.
            eprintln!("lockward: --fence-db guards writes under one holder: not with --shared");
            return exit::USAGE;
        }
        return run_shared(store, &args, &opts, grace).await;
    }
    let began = Instant::now();
    let acquired = if args.lease.no_wait {
        store.try_acquire_all(&args.names, &opts).await
    } else {
        store.acquire_all(&args.names, &opts).await
    };
    let all = match acquired {
        Ok(all) => all,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    // The write side of each: --shared runs finish first. Plain locks, not
    // RwLock::write, so that a name keeps the layout other clients share
    // for a plain lock (ZooKeeper: Curator's InterProcessMutex).
    for guard in all.guards() {
        if let Err(e) = exclude_readers(store, guard, &opts, args.lease.no_wait, began).await {
            let _ = all.release().await;
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    }
    let mut owned = lock_env(&all, &args.names, store);
    if let Some(db) = &args.fence_db {
        let fences: Vec<(&str, u64)> = args
            .names
            .iter()
            .map(|name| (name.as_str(), all.fence(name).unwrap_or_default()))
            .collect();
        let within = opts.get_ttl() / 3;
        match crate::fence_db::claim(db, &fences, within, args.end_stale).await {
            Ok(env) => owned.extend(env.into_iter().map(|(k, v)| (k.to_string(), v))),
            Err(status) => {
                let _ = all.release().await;
                return status;
            }
        }
    }
    let env: Vec<(&str, String)> = owned.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let held = all.lost_signal();
    let what = args.names.join(", ");
    let ended = run_while(&held, &what, never(), &args.command, &env, grace).await;
    let released = all.release().await;
    finish(ended, released).0
}

/// Turns the plain hold `guard` into the write side of its name: waits
/// for `--shared` runs to finish (not at all with `no_wait`).
/// `--wait` is one over the locks and the readers: what is left of it
/// since `began`.
async fn exclude_readers(
    store: &Store,
    guard: &Guard,
    opts: &LockOptions,
    no_wait: bool,
    began: Instant,
) -> lockward::Result<()> {
    let lock = RwLock::new(store.clone(), guard.name())?;
    let opts = match no_wait {
        true => opts.clone().wait(Duration::ZERO),
        false => opts.wait_left(began),
    };
    lock.exclude_readers(guard, &opts).await
}

/// `run NAME --shared`: CMD under the read side of NAME.
async fn run_shared(store: &Store, args: &RunArgs, opts: &LockOptions, grace: Duration) -> u8 {
    let [name] = args.names.as_slice() else {
        eprintln!("lockward: --shared takes exactly one NAME");
        return exit::USAGE;
    };
    let acquired = match RwLock::new(store.clone(), name) {
        Ok(lock) if args.lease.no_wait => lock.try_read(opts).await,
        Ok(lock) => lock.read(opts).await,
        Err(e) => Err(e),
    };
    let reader = match acquired {
        Ok(reader) => reader,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    let env = vec![
        ("LOCKWARD_NAME", name.clone()),
        ("LOCKWARD_FENCE", reader.fence().to_string()),
        ("LOCKWARD_SHARED", "1".to_string()),
        ("LOCKWARD_STORE", store.address()),
    ];
    let held = reader.lost_signal();
    let ended = run_while(&held, name, never(), &args.command, &env, grace).await;
    let released = reader.release().await;
    finish(ended, released).0
}

/// CMD's environment under its locks: the first name given and its fence
/// as `LOCKWARD_NAME`/`LOCKWARD_FENCE`; with several, each numbered in the
/// order given as well.
fn lock_env(all: &MultiGuard, names: &[String], store: &Store) -> Vec<(String, String)> {
    let fence = |name: &str| all.fence(name).unwrap_or_default().to_string();
    let mut env = vec![
        ("LOCKWARD_NAME".to_string(), names[0].clone()),
        ("LOCKWARD_FENCE".to_string(), fence(&names[0])),
        ("LOCKWARD_STORE".to_string(), store.address()),
    ];
    if names.len() > 1 {
        for (i, name) in names.iter().enumerate() {
            env.push((format!("LOCKWARD_NAME_{}", i + 1), name.clone()));
            env.push((format!("LOCKWARD_FENCE_{}", i + 1), fence(name)));
        }
    }
    env
}
