//! A server process we started: signals, log, cleanup.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()?;
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
            eprintln!("---- last lines of the {} log ({}) ----", self.label, self.log.display());
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
        self.kill();
    }
}
