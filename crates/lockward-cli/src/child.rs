//! Starting CMD so that it can be stopped as a whole and never outlives
//! lockward.

use std::io;
use std::process::Stdio;

use tokio::process::{Child, Command};

/// A running CMD, leader of its own process group.
pub struct Supervised {
    pub child: Child,
    group: libc::pid_t,
}

/// Starts `program args…` directly (no shell) in a new process group, with
/// `env` added. On Linux the child gets SIGKILL when lockward dies, even by
/// SIGKILL, so a crashed runner cannot leave work running without the lock.
pub fn spawn(program: &str, args: &[String], env: &[(&str, String)]) -> io::Result<Supervised> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .kill_on_drop(false);
    // SAFETY: getpid is async-signal-safe; it runs before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: only async-signal-safe calls (setpgid, prctl, getppid, _exit)
    // run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // lockward may have died before prctl took effect.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
            }
            let _ = parent;
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    let group = child.id().map(|id| id as libc::pid_t).unwrap_or(0);
    Ok(Supervised { child, group })
}

impl Supervised {
    /// Sends `signal` to CMD's whole process group.
    pub fn signal_group(&self, signal: libc::c_int) {
        if self.group > 0 {
            // SAFETY: plain syscall; a group that is already gone gives ESRCH.
            unsafe {
                libc::kill(-self.group, signal);
            }
        }
    }
}

/// The exit status lockward passes on for CMD's `status`.
pub fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        _ => crate::exit::SOFTWARE,
    }
}
