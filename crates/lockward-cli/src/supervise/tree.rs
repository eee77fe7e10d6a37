//! A process's descendants, found through `/proc`, and how to end them.
//!
//! Both the keeper and lockward are child subreapers: a process whose
//! parent dies is handed to the nearest of them still alive, not to init.
//! So a subreaper that signals its descendants and reaps until it has no
//! child left has proof that the whole tree below it is gone.

use std::time::{Duration, Instant};

/// Makes this process a child subreaper: orphans below it are re-parented
/// to it. A no-op where the system has no such thing.
pub fn become_subreaper() {
    // SAFETY: plain syscall on this process.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    };
}

/// Whether this process is a child subreaper.
pub fn is_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        let mut flag: libc::c_int = 0;
        // SAFETY: PR_GET_CHILD_SUBREAPER writes one int to the pointer.
        let rc = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut flag, 0, 0, 0) };
        rc == 0 && flag != 0
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Sends `sig` to every descendant of this process; how many there were.
pub fn signal_descendants(sig: libc::c_int) -> usize {
    let below = descendants(std::process::id() as libc::pid_t);
    for pid in &below {
        // SAFETY: plain syscall; a pid already gone gives ESRCH.
        unsafe { libc::kill(*pid, sig) };
    }
    below.len()
}

/// Every process below `root` (children, their children, …), from `/proc`.
pub fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut parents = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some(ppid) = parent_of(pid) {
                parents.push((pid, ppid));
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    tree.remove(0);
    tree
}

/// The parent of `pid`, from `/proc/PID/stat` (after the command name,
/// which may hold spaces and parentheses).
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Reaps every child that has exited, calling `exited(pid, raw status)` for
/// each; whether any child is left.
pub fn reap(mut exited: impl FnMut(libc::pid_t, libc::c_int)) -> bool {
    loop {
        let mut raw = 0;
        // SAFETY: plain syscall on our own children; WNOHANG never blocks.
        let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
        match pid {
            0 => return true,
            p if p > 0 => exited(p, raw),
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            // ECHILD: no child at all.
            _ => return false,
        }
    }
}

/// SIGKILL to every descendant (after `also`, which ends what may not be
/// below this process) and reaps, calling `exited` for each reaped child,
/// until no child is left or `within` has passed; whether the tree is gone.
///
/// Only for a process whose children all belong to the tree: it reaps
/// every child, so a child that another part of the program waits for
/// must be reaped first.
pub fn kill_all(
    within: Duration,
    mut also: impl FnMut(),
    mut exited: impl FnMut(libc::pid_t, libc::c_int),
) -> bool {
    let give_up = Instant::now() + within;
    loop {
        also();
        signal_descendants(libc::SIGKILL);
        if !reap(&mut exited) {
            return true;
        }
        if Instant::now() >= give_up {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
