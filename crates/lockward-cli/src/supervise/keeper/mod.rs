//! The keeper: a small process between lockward and CMD that bounds CMD's
//! whole process tree by the lock.
//!
//! lockward starts it (the `lockward` binary again, hidden command
//! `keeper`) with two pipes; the keeper starts CMD. It is a child
//! subreaper, so every process CMD starts, in CMD's group or not (a
//! `setsid` daemon included), stays its descendant even when its own parent
//! exits. It holds the lease's local deadline, which lockward moves forward
//! after each renewal, and it ends the tree:
//!
//! - when lockward dies, by any signal (its end of the pipe closes);
//! - when the deadline comes without a renewal (a frozen lockward cannot
//!   move it): SIGTERM `grace` before it, SIGKILL at it;
//! - when lockward says the lock is lost: SIGTERM now, SIGKILL after
//!   `grace` (or at the deadline, if sooner);
//! - when CMD exits: what it left behind gets SIGTERM, then SIGKILL after
//!   `grace`, before lockward is told (and releases the lock).
//!
//! The keeper lives in a process group of its own, so a signal to
//! lockward's group does not stop it, and it ignores the usual terminating
//! signals. If it is killed all the same, CMD dies with it (its parent-death
//! signal), lockward (a subreaper too) inherits the rest of the tree and
//! ends it before it releases the lock (see [`handle`]), and where CMD has
//! a cgroup the warden ends it at once (see [`crate::warden`]).
//!
//! Messages, one per line. lockward to keeper: `deadline MS` (the deadline
//! is MS milliseconds from now), `signal N` (forward N to CMD's group),
//! `stop` (the lock is lost). Keeper to lockward: `exited CODE STOPPED`
//! (CMD's status as lockward passes it on, and whether the keeper stopped
//! it), or `failed CODE` (CMD could not be started).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::FromRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::supervise::cgroup::CommandCgroup;
use crate::supervise::tree;

mod handle;

pub use handle::{Keeper, Report};

/// One process of `lockward run` and friends (internal).
#[derive(clap::Args)]
pub struct KeeperArgs {
    /// The pipe lockward writes to.
    #[arg(long)]
    from: i32,
    /// The pipe lockward reads.
    #[arg(long)]
    to: i32,
    /// The first deadline, in ms from now.
    #[arg(long)]
    deadline_ms: u64,
    /// Between SIGTERM and SIGKILL, in ms.
    #[arg(long)]
    grace_ms: u64,
    /// The cgroup CMD's tree runs in, if it has one.
    #[arg(long)]
    cgroup: Option<std::path::PathBuf>,
    /// A pipe end the keeper holds open and never writes: the warden
    /// watches the other end.
    #[arg(long)]
    hold: Option<i32>,
    /// CMD and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// Signals the keeper and the warden survive; CMD gets them back at their
/// defaults.
pub const IGNORED: [libc::c_int; 5] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGPIPE,
];

/// Runs the keeper; its exit status is 0 unless it could not set itself up.
pub fn keep(args: KeeperArgs) -> u8 {
    // SAFETY: plain syscalls on this process; the fds were handed to us by
    // lockward and are not used by anything else here.
    let (from, mut to) = unsafe {
        libc::setpgid(0, 0);
        #[cfg(target_os = "linux")]
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        for sig in IGNORED {
            libc::signal(sig, libc::SIG_IGN);
        }
        // CMD must not hold these: their end of file tells lockward and
        // the warden that the keeper is gone.
        for fd in [args.from, args.to].into_iter().chain(args.hold) {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        (File::from_raw_fd(args.from), File::from_raw_fd(args.to))
    };
    let cgroup = args.cgroup.map(CommandCgroup::at);
    let joiner = cgroup.as_ref().map(CommandCgroup::joiner);
    let (program, rest) = args.command.split_first().expect("clap requires CMD");
    let mut cmd = Command::new(program);
    cmd.args(rest)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    // SAFETY: only async-signal-safe calls run between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Before exec, so that nothing CMD starts is outside it.
            if joiner.as_ref().is_some_and(|j| !j.join()) {
                const WARNING: &[u8] =
                    b"lockward: warning: the command could not join its cgroup; \
it is bounded by the keeper and lockward only\n";
                libc::write(2, WARNING.as_ptr().cast(), WARNING.len());
            }
            for sig in IGNORED {
                libc::signal(sig, libc::SIG_DFL);
            }
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("lockward: cannot run {program:?}: {e}");
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => crate::exit::NOT_FOUND,
                _ => crate::exit::CANNOT_EXECUTE,
            };
            let _ = writeln!(to, "failed {code}");
            return 0;
        }
    };
    let cmd_pid = child.id() as libc::pid_t;
    // Reaped below with waitpid, with every other descendant.
    std::mem::forget(child);
    let (messages, reaped) = read_messages(from);
    let mut tree = Tree {
        cmd_pid,
        cgroup,
        cmd_status: None,
        grace: Duration::from_millis(args.grace_ms),
        deadline: Instant::now() + Duration::from_millis(args.deadline_ms),
        stopped: false,
        cleaning: false,
        kill_at: None,
    };
    let status = tree.watch(&messages, &reaped);
    let _ = writeln!(to, "exited {} {}", status, u8::from(tree.stopped));
    0
}

/// What lockward said, or that it is gone.
enum Message {
    Deadline(Duration),
    /// A child of the keeper can be reaped.
    Child,
    Signal(libc::c_int),
    Stop,
    Gone,
}

/// Reads lockward's messages on a thread of their own (`Gone` when its end
/// of the pipe closes: lockward exited or died), and says `Child` whenever
/// a child can be reaped; the keeper answers each `Child` on the returned
/// sender once it has reaped.
fn read_messages(
    from: File,
) -> (
    std::sync::mpsc::Receiver<Message>,
    std::sync::mpsc::Sender<()>,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    let (reaped, wait_reaped) = std::sync::mpsc::channel::<()>();
    let children = tx.clone();
    std::thread::spawn(move || loop {
        // SAFETY: waitid only fills `info`; WNOWAIT leaves the child to be
        // reaped by the keeper's main thread.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if children.send(Message::Child).is_err() || wait_reaped.recv().is_err() {
            return;
        }
    });
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            let mut words = line.split_whitespace();
            let message = match (
                words.next(),
                words.next().and_then(|w| w.parse::<u64>().ok()),
            ) {
                (Some("deadline"), Some(ms)) => Message::Deadline(Duration::from_millis(ms)),
                (Some("signal"), Some(n)) => Message::Signal(n as libc::c_int),
                (Some("stop"), _) => Message::Stop,
                _ => continue,
            };
            if tx.send(message).is_err() {
                return;
            }
        }
        let _ = tx.send(Message::Gone);
    });
    (rx, reaped)
}

/// CMD's tree and when it must end.
struct Tree {
    cmd_pid: libc::pid_t,
    /// The cgroup CMD's tree runs in, if it has one.
    cgroup: Option<CommandCgroup>,
    /// CMD's status once it was reaped.
    cmd_status: Option<u8>,
    grace: Duration,
    deadline: Instant,
    /// The keeper stopped CMD (the deadline came, or the lock was lost).
    stopped: bool,
    /// CMD ended by itself and what it left got SIGTERM.
    cleaning: bool,
    /// When the tree gets SIGKILL.
    kill_at: Option<Instant>,
}

/// The longest the keeper sleeps without looking at the clock.
const MAX_SLEEP: Duration = Duration::from_secs(1);

impl Tree {
    /// Watches until CMD has exited and its tree is gone; CMD's status as
    /// lockward passes it on.
    fn watch(
        &mut self,
        messages: &std::sync::mpsc::Receiver<Message>,
        reaped: &std::sync::mpsc::Sender<()>,
    ) -> u8 {
        let mut child_waiting = false;
        loop {
            let children_left = self.reap();
            if std::mem::take(&mut child_waiting) {
                let _ = reaped.send(());
            }
            if let Some(code) = self.cmd_status {
                if !children_left {
                    return code;
                }
                // CMD is done: what it left behind must not run on
                // without the lock.
                if !self.cleaning && !self.stopped {
                    self.cleaning = true;
                    tree::signal_descendants(libc::SIGTERM);
                    self.kill_at = Some(Instant::now() + self.grace);
                }
            }
            let now = Instant::now();
            if !self.stopped && now + self.grace >= self.deadline {
                eprintln!("lockward: the lease ends without a renewal; stopping the command");
                self.stop(self.deadline);
            }
            if self.kill_at.is_some_and(|at| now >= at) || now >= self.deadline {
                self.kill_all();
                return self.cmd_status.unwrap_or(crate::exit::LOST);
            }
            // Asleep until a message, a child to reap, or the next moment
            // the clock matters.
            let next = [
                (!self.stopped)
                    .then(|| self.deadline.checked_sub(self.grace))
                    .flatten(),
                self.kill_at,
                Some(self.deadline),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now);
            let sleep = next.saturating_duration_since(now).min(MAX_SLEEP);
            match messages.recv_timeout(sleep) {
                Ok(Message::Child) => child_waiting = true,
                Ok(Message::Deadline(left)) => self.deadline = Instant::now() + left,
                Ok(Message::Signal(sig)) => {
                    // SAFETY: plain syscall; ESRCH once the group is gone.
                    unsafe { libc::kill(-self.cmd_pid, sig) };
                }
                Ok(Message::Stop) => {
                    let at = (Instant::now() + self.grace).min(self.deadline);
                    self.stop(at);
                }
                Ok(Message::Gone) => {
                    // lockward is dead: nothing may run on without it.
                    self.kill_all();
                    return self.cmd_status.unwrap_or(crate::exit::LOST);
                }
                Err(_) => {}
            }
        }
    }

    /// SIGTERM to the whole tree now (once), SIGKILL at `kill_at`.
    fn stop(&mut self, kill_at: Instant) {
        if !self.stopped {
            tree::signal_descendants(libc::SIGTERM);
            self.stopped = true;
        }
        self.kill_at = Some(self.kill_at.map_or(kill_at, |k| k.min(kill_at)));
    }

    /// SIGKILL to every descendant until none is left: as a subreaper, the
    /// keeper inherits each one whose parent died, so "no children" means
    /// the whole tree is gone.
    fn kill_all(&mut self) {
        let (cmd_pid, cgroup) = (self.cmd_pid, self.cgroup.clone());
        let mut cmd_status = None;
        tree::kill_all(
            Duration::from_secs(5),
            || {
                if let Some(c) = &cgroup {
                    c.kill();
                }
            },
            |pid, raw| {
                if pid == cmd_pid {
                    cmd_status = Some(exit_code(raw));
                }
            },
        );
        self.cmd_status = self.cmd_status.or(cmd_status);
    }

    /// Reaps every child that exited (keeping CMD's status); whether any
    /// child is left.
    fn reap(&mut self) -> bool {
        let cmd_pid = self.cmd_pid;
        let status = &mut self.cmd_status;
        tree::reap(|pid, raw| {
            if pid == cmd_pid {
                *status = Some(exit_code(raw));
            }
        })
    }
}

/// CMD's status as lockward passes it on: its code, or 128 + the signal.
fn exit_code(raw: libc::c_int) -> u8 {
    if libc::WIFEXITED(raw) {
        libc::WEXITSTATUS(raw).clamp(0, 255) as u8
    } else if libc::WIFSIGNALED(raw) {
        (128 + libc::WTERMSIG(raw)).clamp(0, 255) as u8
    } else {
        crate::exit::SOFTWARE
    }
}
