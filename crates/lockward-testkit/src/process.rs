//! A server process we started: signals, log, cleanup.
//!
//! Servers are forked from one thread that lives as long as the test
//! process, with the parent-death signal set, so they die with the test
//! process however it ends, even when a server sits in a `static` that is
//! never dropped. (The signal follows the forking *thread*, and test
//! threads end after each test, hence the dedicated thread.)

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Forks `cmd` from the long-lived spawner thread.
fn spawn_from_spawner(cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("testkit-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                // Never return: the servers' parent-death signal is tied
                // to this thread.
                loop {
                    std::thread::park();
                }
            })
            .expect("start the spawner thread");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    sender
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, reply_tx))
        .expect("spawner thread alive");
    reply_rx.recv().expect("spawner thread replied")
}

/// Waits up to `within` for `ready` to say the server in `process` answers,
/// asking every `every`; `false` (and `process` emptied) when it exited
/// first or never answered.
pub fn wait_until_ready(
    process: &mut Option<ServerProcess>,
    within: Duration,
    every: Duration,
    mut ready: impl FnMut() -> bool,
) -> bool {
    let until = std::time::Instant::now() + within;
    while std::time::Instant::now() < until {
        if process.as_mut().is_some_and(ServerProcess::exited) {
            *process = None;
            return false;
        }
        if ready() {
            return true;
        }
        std::thread::sleep(every);
    }
    false
}

/// Calls `launch` until it starts the server, 20 times at most, 250 ms
/// apart (a killed server's files and port take a moment to free);
/// whether it did.
pub fn relaunch(mut launch: impl FnMut() -> bool) -> bool {
    for _ in 0..20 {
        if launch() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    false
}

/// A child process with its log file. Killed (SIGKILL) when dropped.
pub struct ServerProcess {
    child: Option<Child>,
    log: PathBuf,
    label: String,
}

impl ServerProcess {
    /// Starts `cmd` with stdout and stderr appended to `log`.
    pub fn spawn(label: &str, mut cmd: Command, log: &Path) -> std::io::Result<Self> {
        let out = File::options().create(true).append(true).open(log)?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        // SAFETY: prctl, sigemptyset and sigprocmask are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                #[cfg(target_os = "linux")]
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                // A server takes its signals whatever its starter blocked
                // (lockward-testserver blocks SIGTERM to wait for it).
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                Ok(())
            });
        }
        let child = spawn_from_spawner(cmd)?;
        Ok(ServerProcess {
            child: Some(child),
            log: log.to_path_buf(),
            label: label.to_string(),
        })
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        match &mut self.child {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, SIGTERM, …).
    pub fn signal(&self, signal: i32) {
        if let Some(pid) = self.pid() {
            // SAFETY: plain syscall on a pid we started and have not reaped.
            unsafe {
                libc::kill(pid as i32, signal);
            }
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, wait up to `grace` for a clean exit, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) {
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        let until = std::time::Instant::now() + grace;
        while std::time::Instant::now() < until {
            if self.exited() {
                self.child = None;
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "---- last lines of the {} log ({}) ----",
                self.label,
                self.log.display()
            );
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
        self.kill();
    }
}

/// Every process below `pid` (children, their children, …), read from
/// `/proc`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // The parent is the second field after the command's parentheses.
        let after = &stat[stat.rfind(')').unwrap_or(0) + 1..];
        if let Some(parent) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parents.push((child, parent));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let of = found[i];
        found.extend(parents.iter().filter(|(_, p)| *p == of).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}
