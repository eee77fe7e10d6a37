//! `lockward run NAME -- CMD ARGS…`: CMD runs only while the lock is held.

use std::time::Duration;

use lockward::{Guard, Store};
use tokio::signal::unix::{signal, SignalKind};

use crate::exit;
use crate::keeper::{Keeper, Report};
use crate::lease::LeaseArgs;

/// Run CMD while holding lock NAME, renewing it; CMD is stopped if the lock is lost.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The lock's name.
    pub name: String,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The command and its arguments, after `--`; run directly, not by a shell.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Takes the lock, runs CMD under it, and returns lockward's exit status.
pub async fn run(store: &Store, args: RunArgs) -> u8 {
    let (opts, grace) = match args.lease.options(store) {
        Ok(checked) => checked,
        Err(status) => return status,
    };
    let acquired = if args.lease.no_wait {
        store.try_acquire(&args.name, &opts).await
    } else {
        store.acquire(&args.name, &opts).await
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    let env = vec![
        ("LOCKWARD_NAME", args.name.clone()),
        ("LOCKWARD_FENCE", guard.fence().to_string()),
        ("LOCKWARD_STORE", store.address()),
    ];
    run_and_release(guard, &args.command, &env, grace).await.0
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
    match ended {
        Ended::Exited(code) => {
            if let Err(e) = released {
                eprintln!("lockward: warning: {e}");
            }
            (code, code == 0)
        }
        Ended::Failed(code) => (code, false),
        Ended::Lost => (exit::LOST, false),
    }
}

/// How a command run under a lock ended.
pub enum Ended {
    /// It exited by itself (or after a forwarded signal): its status.
    Exited(u8),
    /// The lock was lost and the command was stopped.
    Lost,
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
    // Listen before CMD starts, so a signal sent as soon as it runs is
    // forwarded rather than lost (or fatal to lockward).
    let Some(signals) = Signals::install() else {
        eprintln!("lockward: cannot install signal handlers");
        return Ended::Failed(exit::SOFTWARE);
    };
    match Keeper::start(command, env, guard.deadline(), grace) {
        Ok(keeper) => supervise(guard, keeper, signals).await,
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
/// lost outright (SIGTERM at once, SIGKILL after the grace period), and
/// forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to CMD's group.
async fn supervise(guard: &Guard, mut keeper: Keeper, signals: Signals) -> Ended {
    let mut lost = guard.lost_signal();
    let mut renewed = guard.lost_signal();
    let mut lost_seen = false;
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
                eprintln!("lockward: lock {} lost ({reason}); stopping the command", guard.name());
                keeper.stop();
            }
            _ = renewed.changed() => keeper.deadline(guard.deadline()),
            _ = int.recv() => keeper.signal(libc::SIGINT),
            _ = term.recv() => keeper.signal(libc::SIGTERM),
            _ = hup.recv() => keeper.signal(libc::SIGHUP),
            _ = quit.recv() => keeper.signal(libc::SIGQUIT),
        }
    };
    match report {
        Report::Failed(code) => Ended::Failed(code),
        Report::Exited { stopped, .. } if stopped || lost_seen => Ended::Lost,
        Report::Exited { code, .. } => Ended::Exited(code),
    }
}
