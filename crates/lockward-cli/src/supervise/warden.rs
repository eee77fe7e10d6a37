//! The warden: a third small process that ends CMD's cgroup when the keeper
//! is gone, so that no two deaths free the tree.
//!
//! lockward starts it (the `lockward` binary again, hidden command
//! `warden`) beside the keeper when the command has a cgroup of its own
//! (see [`crate::cgroup`]). It holds the read end of a pipe whose only
//! write end is the keeper's, and does nothing until that pipe closes: when
//! the keeper exits, by itself or killed. Then it writes `cgroup.kill`, waits
//! for the cgroup to empty and removes it. After a normal end the cgroup is
//! already empty and this is only the cleanup; after the keeper was killed
//! (alone, or together with lockward) it ends the tree at once, before the
//! lease can pass.
//!
//! Like the keeper it lives in a process group of its own and ignores the
//! usual terminating signals. Only SIGKILL of all three at once (lockward,
//! keeper and warden) leaves CMD's children running.

use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::time::Duration;

use crate::supervise::cgroup::CommandCgroup;

/// One process of `lockward run` and friends (internal).
#[derive(clap::Args)]
pub struct WardenArgs {
    /// The pipe whose end of file means the keeper is gone.
    #[arg(long)]
    watch: i32,
    /// The command's cgroup.
    #[arg(long)]
    cgroup: std::path::PathBuf,
}

/// Runs the warden; its exit status is 0 unless the cgroup kept a process.
pub fn ward(args: WardenArgs) -> u8 {
    // SAFETY: plain syscalls on this process; the fd was handed to us by
    // lockward and is not used by anything else here.
    let mut keeper = unsafe {
        libc::setpgid(0, 0);
        for sig in crate::supervise::keeper::IGNORED {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::fcntl(args.watch, libc::F_SETFD, libc::FD_CLOEXEC);
        File::from_raw_fd(args.watch)
    };
    let mut buf = [0u8; 64];
    // Nothing is ever written: only end of file (or an error) ends this.
    loop {
        match keeper.read(&mut buf) {
            Ok(0) => break,
            Err(e) if e.kind() != std::io::ErrorKind::Interrupted => break,
            _ => continue,
        }
    }
    let cgroup = CommandCgroup::at(args.cgroup);
    let (held, empty) = cgroup.end(Duration::from_secs(5));
    if held > 0 {
        eprintln!(
            "lockward: the command's keeper is gone; the warden ended {held} process(es) left in {}",
            cgroup.path().display()
        );
    }
    cgroup.remove();
    if empty {
        0
    } else {
        eprintln!(
            "lockward: processes in {} could not be ended",
            cgroup.path().display()
        );
        crate::exit::SOFTWARE
    }
}
