//! `lockward run NAME [NAME…] -- CMD ARGS…`: CMD runs only while the lock
//! (or every one of the locks) is held.

use std::future::Future;
use std::time::{Duration, Instant};

use lockward::recipe::RwLock;
use lockward::{Guard, LockOptions, LostSignal, MultiGuard, Store};
use tokio::signal::unix::{signal, SignalKind};

use crate::exit;
use crate::keeper::{Keeper, Report};
use crate::lease::LeaseArgs;

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
    let owned = lock_env(&all, &args.names, store);
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

/// Runs CMD under `guard`, releases the lock, and returns lockward's exit
/// status and whether CMD exited by itself with status 0.
pub async fn run_and_release(
    guard: Guard,
    command: &[String],
    env: &[(&str, String)],
    grace: Duration,
) -> (u8, bool) {
    let ended = run_under(&guard, command, env, grace).await;
    let released = guard.release().await;
    finish(ended, released)
}

/// lockward's exit status once CMD ended and the locks were released, and
/// whether CMD exited by itself with status 0.
fn finish(ended: Ended, released: lockward::Result<()>) -> (u8, bool) {
    match ended {
        Ended::Exited(code) => {
            if let Err(e) = released {
                eprintln!("lockward: warning: {e}");
            }
            (code, code == 0)
        }
        Ended::Failed(code) => (code, false),
        Ended::Lost | Ended::Stopped => (exit::LOST, false),
    }
}

/// How a command run under a lock ended.
pub enum Ended {
    /// It exited by itself (or after a forwarded signal): its status.
    Exited(u8),
    /// The lock was lost and the command was stopped.
    Lost,
    /// The command was stopped on request (the `stop` of [`run_while`]).
    Stopped,
    /// It could not be started or waited for: lockward's status.
    Failed(u8),
}

/// Starts `command` with `env` while `guard` holds the lock and supervises
/// it (see [`supervise`]); the caller releases the lock afterwards.
pub async fn run_under(
    guard: &Guard,
    command: &[String],
    env: &[(&str, String)],
    grace: Duration,
) -> Ended {
    let held = guard.lost_signal();
    run_while(&held, guard.name().as_str(), never(), command, env, grace).await
}

/// A stop request that never comes.
fn never() -> impl Future<Output = String> {
    std::future::pending()
}

/// Starts `command` with `env` while the locks behind `held` (named `what`
/// in messages) are held, and supervises it; the caller releases them.
/// When `stop` resolves (with why), CMD is stopped as on a loss.
pub async fn run_while(
    held: &LostSignal,
    what: &str,
    stop: impl Future<Output = String>,
    command: &[String],
    env: &[(&str, String)],
    grace: Duration,
) -> Ended {
    // Listen before CMD starts, so a signal sent as soon as it runs is
    // forwarded rather than lost (or fatal to lockward).
    let Some(signals) = Signals::install() else {
        eprintln!("lockward: cannot install signal handlers");
        return Ended::Failed(exit::SOFTWARE);
    };
    match Keeper::start(command, env, held.deadline(), grace) {
        Ok(keeper) => supervise(held, what, stop, keeper, signals).await,
        Err(e) => {
            eprintln!("lockward: cannot start the command's keeper: {e}");
            Ended::Failed(exit::SOFTWARE)
        }
    }
}

/// The signals lockward forwards to CMD's process group.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Option<Signals> {
        Some(Signals {
            int: signal(SignalKind::interrupt()).ok()?,
            term: signal(SignalKind::terminate()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
            quit: signal(SignalKind::quit()).ok()?,
        })
    }
}

/// Waits for the keeper's report while watching the lease and lockward's
/// own signals.
///
/// The keeper holds the lease's local deadline and ends CMD's whole tree by
/// it, so CMD is gone before the store can give the lock to someone else,
/// even if lockward is frozen or killed (see [`crate::keeper`]). lockward
/// moves the deadline after each renewal, tells the keeper when the lock is
/// lost outright or `stop` resolves (SIGTERM at once, SIGKILL after the
/// grace period), and forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to CMD's
/// group.
async fn supervise(
    held: &LostSignal,
    what: &str,
    stop: impl Future<Output = String>,
    mut keeper: Keeper,
    signals: Signals,
) -> Ended {
    let mut lost = held.clone();
    let mut renewed = held.clone();
    let mut lost_seen = false;
    let mut told = false;
    let mut stop = std::pin::pin!(stop);
    let Signals {
        mut int,
        mut term,
        mut hup,
        mut quit,
    } = signals;
    let report = loop {
        tokio::select! {
            report = keeper.report() => break report,
            reason = lost.wait(), if !lost_seen => {
                lost_seen = true;
                eprintln!("lockward: lock {what} lost ({reason}); stopping the command");
                keeper.stop();
            }
            why = &mut stop, if !told && !lost_seen => {
                told = true;
                eprintln!("lockward: {why}; stopping the command");
                keeper.stop();
            }
            _ = renewed.changed() => keeper.deadline(held.deadline()),
            _ = int.recv() => keeper.signal(libc::SIGINT),
            _ = term.recv() => keeper.signal(libc::SIGTERM),
            _ = hup.recv() => keeper.signal(libc::SIGHUP),
            _ = quit.recv() => keeper.signal(libc::SIGQUIT),
        }
    };
    match report {
        Report::Failed(code) => Ended::Failed(code),
        Report::Exited { .. } if told => Ended::Stopped,
        Report::Exited { stopped, .. } if stopped || lost_seen => Ended::Lost,
        Report::Exited { code, .. } => Ended::Exited(code),
    }
}
