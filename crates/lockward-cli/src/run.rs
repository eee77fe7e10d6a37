//! `lockward run NAME -- CMD ARGS…`: CMD runs only while the lock is held.

use std::time::{Duration, Instant};

use lockward::{Guard, Store};
use tokio::signal::unix::{signal, SignalKind};

use crate::child::{self, Supervised};
use crate::exit;
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
    let (program, rest) = command.split_first().expect("clap requires CMD");
    match child::spawn(program, rest, env) {
        Ok(supervised) => supervise(guard, supervised, signals, grace).await,
        Err(e) => {
            eprintln!("lockward: cannot run {program:?}: {e}");
            Ended::Failed(match e.kind() {
                std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            })
        }
    }
}

/// Waits for CMD while watching the lease and lockward's own signals.
///
/// Stopping is tied to the lease's local deadline, so CMD is dead before the
/// store can give the lock to someone else: when renewals keep failing and
/// only `grace` is left, CMD gets SIGTERM; at the deadline, SIGKILL. When the
/// lock is lost outright (taken over), SIGTERM at once and SIGKILL after
/// `grace`.
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

async fn supervise(guard: &Guard, mut cmd: Supervised, signals: Signals, grace: Duration) -> Ended {
    let mut lost = guard.lost_signal();
    let mut lost_seen = false;
    let mut kill_at: Option<Instant> = None;
    let Signals {
        mut int,
        mut term,
        mut hup,
        mut quit,
    } = signals;
    let status = loop {
        let term_at = guard
            .deadline()
            .checked_sub(grace)
            .unwrap_or_else(Instant::now);
        tokio::select! {
            status = cmd.child.wait() => break status,
            reason = lost.wait(), if !lost_seen => {
                lost_seen = true;
                eprintln!("lockward: lock {} lost ({reason}); stopping the command", guard.name());
                if kill_at.is_none() {
                    cmd.signal_group(libc::SIGTERM);
                }
                let at = Instant::now() + grace;
                kill_at = Some(kill_at.map_or(at, |k| k.min(at)));
            }
            _ = tokio::time::sleep_until(term_at.into()), if kill_at.is_none() => {
                // Re-read: a renewal may have moved the deadline meanwhile.
                if Instant::now() + grace >= guard.deadline() {
                    eprintln!(
                        "lockward: cannot renew lock {}; stopping the command before it expires",
                        guard.name()
                    );
                    cmd.signal_group(libc::SIGTERM);
                    kill_at = Some(guard.deadline());
                }
            }
            _ = sleep_until_opt(kill_at) => {
                cmd.signal_group(libc::SIGKILL);
                kill_at = Some(Instant::now() + Duration::from_secs(3600));
            }
            _ = int.recv() => cmd.signal_group(libc::SIGINT),
            _ = term.recv() => cmd.signal_group(libc::SIGTERM),
            _ = hup.recv() => cmd.signal_group(libc::SIGHUP),
            _ = quit.recv() => cmd.signal_group(libc::SIGQUIT),
        }
    };
    // Grandchildren may linger in the group after CMD itself exited.
    if kill_at.is_some() {
        cmd.signal_group(libc::SIGKILL);
    }
    let status = match status {
        Ok(status) => status,
        Err(e) => {
            eprintln!("lockward: waiting for the command failed: {e}");
            return Ended::Failed(exit::SOFTWARE);
        }
    };
    if lost_seen || kill_at.is_some() {
        return Ended::Lost;
    }
    Ended::Exited(child::exit_code(status))
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
