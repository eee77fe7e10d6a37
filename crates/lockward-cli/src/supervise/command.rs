//! A command run under a lock: started through the keeper (which ends its
//! whole tree by the lease's local deadline), watched against the lease and
//! lockward's own signals, and its end turned into lockward's exit status.

use std::future::Future;
use std::time::Duration;

use lockward::{Guard, LostSignal};
use tokio::signal::unix::{signal, SignalKind};

use super::keeper::{Keeper, Report};
use crate::exit;

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
pub fn finish(ended: Ended, released: lockward::Result<()>) -> (u8, bool) {
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
pub fn never() -> impl Future<Output = String> {
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
/// even if lockward is frozen or killed (see [`super::keeper`]). lockward
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
