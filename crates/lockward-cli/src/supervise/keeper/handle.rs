//! lockward's side of the keeper: starting it (with a cgroup and a warden
//! where the machine allows), talking to it, and ending what it leaves
//! behind when it is killed.
//!
//! lockward is a child subreaper: when the keeper dies, CMD dies with it
//! (its parent-death signal) and everything else of the tree is re-parented
//! to lockward. lockward then ends every descendant and reaps until it has
//! no child left, which proves the tree gone, while it still holds and
//! renews the lock; only then does the caller release it.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use crate::supervise::cgroup::CommandCgroup;
use crate::supervise::tree;

/// lockward's side of the keeper: its pipes, its process, and the
/// command's cgroup and warden when there are.
pub struct Keeper {
    to: File,
    from: tokio::net::unix::pipe::Receiver,
    lines: Vec<u8>,
    process: tokio::process::Child,
    cgroup: Option<CommandCgroup>,
    warden: Option<std::process::Child>,
    /// How the keeper ended, once it died without a report.
    died: Option<String>,
}

/// How the keeper says CMD ended.
pub enum Report {
    /// CMD's status, and whether the keeper stopped it.
    Exited { code: u8, stopped: bool },
    /// CMD could not be started, or the keeper died: lockward's status.
    /// Either way CMD's tree is gone.
    Failed(u8),
}

/// How long one attempt to end a dead keeper's tree may take before
/// lockward says that processes resist.
const END_ATTEMPT: Duration = Duration::from_secs(10);

impl Keeper {
    /// Starts the keeper, which starts `command` with `env`; the lease's
    /// local deadline is `deadline`.
    pub fn start(
        command: &[String],
        env: &[(&str, String)],
        deadline: Instant,
        grace: Duration,
    ) -> std::io::Result<Keeper> {
        // What the keeper leaves behind if it dies comes to lockward.
        tree::become_subreaper();
        let cgroup = CommandCgroup::create().ok();
        // The warden watches a pipe whose only write end the keeper holds.
        let (watch, hold) = match &cgroup {
            Some(_) => {
                let (r, w) = pipe()?;
                (Some(r), Some(w))
            }
            None => (None, None),
        };
        let warden = match (&cgroup, &watch) {
            (Some(c), Some(watch)) => match start_warden(c, watch) {
                Ok(w) => Some(w),
                Err(e) => {
                    eprintln!("lockward: warning: cannot start the command's warden: {e}");
                    None
                }
            },
            _ => None,
        };
        drop(watch);
        let (to_keeper_read, to_keeper) = pipe()?;
        let (from_keeper, from_keeper_write) = pipe()?;
        let mut cmd = tokio::process::Command::new(own_exe()?);
        cmd.arg0("lockward")
            .arg("keeper")
            .arg("--from")
            .arg(to_keeper_read.as_raw_fd().to_string())
            .arg("--to")
            .arg(from_keeper_write.as_raw_fd().to_string())
            .arg("--deadline-ms")
            .arg(millis_until(deadline).to_string())
            .arg("--grace-ms")
            .arg(grace.as_millis().to_string());
        if let (Some(c), Some(hold)) = (&cgroup, &hold) {
            cmd.arg("--cgroup")
                .arg(c.path())
                .arg("--hold")
                .arg(hold.as_raw_fd().to_string());
        }
        cmd.arg("--")
            .args(command)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            // CMD's parent is the keeper; this names the lockward to signal.
            .env("LOCKWARD_PID", std::process::id().to_string())
            .kill_on_drop(false);
        let inherited: Vec<i32> = [to_keeper_read.as_raw_fd(), from_keeper_write.as_raw_fd()]
            .into_iter()
            .chain(hold.as_ref().map(AsRawFd::as_raw_fd))
            .collect();
        // SAFETY: fcntl is async-signal-safe; it only clears close-on-exec
        // on the pipe ends the keeper inherits.
        unsafe { cmd.pre_exec(move || inherit(&inherited)) };
        let process = match cmd.spawn() {
            Ok(process) => process,
            Err(e) => {
                // Its pipe is closed with `hold`: it clears up and exits.
                drop(hold);
                if let Some(mut warden) = warden {
                    let _ = warden.wait();
                }
                return Err(e);
            }
        };
        // Our copies of the keeper's ends: closed, so that the keeper's
        // death (or ours) shows as end of file on the other side.
        drop((to_keeper_read, from_keeper_write, hold));
        let from = tokio::net::unix::pipe::Receiver::from_file(from_keeper)?;
        Ok(Keeper {
            to: to_keeper,
            from,
            lines: Vec::new(),
            process,
            cgroup,
            warden,
            died: None,
        })
    }

    /// Moves the keeper's deadline to `deadline`.
    pub fn deadline(&mut self, deadline: Instant) {
        let _ = writeln!(self.to, "deadline {}", millis_until(deadline));
    }

    /// Forwards `signal` to CMD's group.
    pub fn signal(&mut self, signal: libc::c_int) {
        let _ = writeln!(self.to, "signal {signal}");
    }

    /// The lock is lost: stop the tree.
    pub fn stop(&mut self) {
        let _ = writeln!(self.to, "stop");
    }

    /// Waits for the keeper's report; CMD and its whole tree are gone by
    /// then, also when the keeper died (lockward ends what it left).
    ///
    /// Cancel-safe: a dropped call loses no line already read, and a call
    /// after the keeper died resumes ending its tree.
    pub async fn report(&mut self) -> Report {
        use tokio::io::AsyncReadExt;
        if self.died.is_some() {
            return self.end_what_the_keeper_left().await;
        }
        loop {
            if let Some(end) = self.lines.iter().position(|b| *b == b'\n') {
                let line = String::from_utf8_lossy(&self.lines[..=end]).into_owned();
                let words: Vec<&str> = line.split_whitespace().collect();
                let report = match words.as_slice() {
                    ["exited", code, stopped] => Report::Exited {
                        code: code.parse().unwrap_or(crate::exit::SOFTWARE),
                        stopped: *stopped == "1",
                    },
                    ["failed", code] => {
                        Report::Failed(code.parse().unwrap_or(crate::exit::SOFTWARE))
                    }
                    _ => {
                        self.lines.drain(..=end);
                        continue;
                    }
                };
                // The line stays until the keeper is reaped: a call dropped
                // meanwhile (the lock lost at that moment) must not take
                // the report with it, or the next call would find only the
                // pipe's end and take the keeper for dead.
                let _ = self.process.wait().await;
                self.finish().await;
                self.lines.drain(..=end);
                return report;
            }
            let mut buf = [0u8; 256];
            match self.from.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    // The keeper died without a report.
                    let how = match self.process.wait().await {
                        Ok(s) => match s.signal() {
                            Some(sig) => format!("killed by signal {sig}"),
                            None => format!("ended with {s}"),
                        },
                        Err(e) => format!("lost ({e})"),
                    };
                    self.died = Some(how);
                    return self.end_what_the_keeper_left().await;
                }
                Ok(n) => self.lines.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// After a normal end: the warden exits once the keeper's pipe closed
    /// (the cgroup is already empty), and the cgroup goes.
    async fn finish(&mut self) {
        if let Some(mut warden) = self.warden.take() {
            let give_up = Instant::now() + Duration::from_secs(5);
            while matches!(warden.try_wait(), Ok(None)) {
                if Instant::now() >= give_up {
                    let _ = warden.kill();
                    let _ = warden.wait();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        if let Some(c) = &self.cgroup {
            c.remove();
        }
    }

    /// The keeper died: ends every process it left (re-parented to
    /// lockward, or in the cgroup) and reaps until lockward has no child
    /// left, then says what it did. The lock stays held and renewed
    /// meanwhile; if processes resist SIGKILL, it stays held until they
    /// are gone.
    async fn end_what_the_keeper_left(&mut self) -> Report {
        let how = self.died.clone().unwrap_or_default();
        let warden = self.warden.take().map(|w| w.id() as libc::pid_t);
        let mut ended = 0;
        loop {
            let cgroup = self.cgroup.clone();
            // Blocking work off the runtime, so renewals go on meanwhile.
            let attempt = tokio::task::spawn_blocking(move || {
                let mut reaped = Vec::new();
                let gone = tree::kill_all(
                    END_ATTEMPT,
                    || {
                        if let Some(c) = &cgroup {
                            c.kill();
                        }
                    },
                    |pid, _| reaped.push(pid),
                );
                (gone, reaped)
            })
            .await;
            let Ok((gone, reaped)) = attempt else {
                break;
            };
            ended += reaped.iter().filter(|p| Some(**p) != warden).count();
            if gone {
                break;
            }
            eprintln!(
                "lockward: processes of the command's tree survive SIGKILL; \
                 holding the lock until they are gone"
            );
        }
        if let Some(c) = &self.cgroup {
            c.remove();
        }
        eprintln!(
            "lockward: the command's keeper was {how}; the {ended} process(es) of the \
             command's tree it left behind are gone; the lock is released only now"
        );
        Report::Failed(crate::exit::SOFTWARE)
    }
}

/// Starts the warden of `cgroup`, watching `watch` (see [`crate::warden`]).
fn start_warden(cgroup: &CommandCgroup, watch: &File) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let fd = watch.as_raw_fd();
    let mut cmd = std::process::Command::new(own_exe()?);
    cmd.arg0("lockward")
        .arg("warden")
        .arg("--watch")
        .arg(fd.to_string())
        .arg("--cgroup")
        .arg(cgroup.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    // SAFETY: fcntl is async-signal-safe; it only clears close-on-exec on
    // the one pipe end the warden inherits.
    unsafe { cmd.pre_exec(move || inherit(&[fd])) };
    cmd.spawn()
}

/// This binary. /proc/self/exe still runs it after a deploy replaced or
/// deleted its file (a long-lived `elect` starts keepers later on).
fn own_exe() -> std::io::Result<std::path::PathBuf> {
    if cfg!(target_os = "linux") {
        Ok(std::path::PathBuf::from("/proc/self/exe"))
    } else {
        std::env::current_exe()
    }
}

/// Clears close-on-exec on `fds`, between fork and exec.
fn inherit(fds: &[i32]) -> std::io::Result<()> {
    for fd in fds {
        // SAFETY: fcntl is async-signal-safe and only changes fd flags.
        if unsafe { libc::fcntl(*fd, libc::F_SETFD, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn millis_until(at: Instant) -> u128 {
    at.saturating_duration_since(Instant::now()).as_millis()
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> std::io::Result<(File, File)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills both fds on success; each is owned once.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])))
    }
}
