//! The cgroup layer: CMD's tree in a cgroup v2 of its own, ended at once
//! with `cgroup.kill`, whoever is left to write it.
//!
//! Where the machine lets lockward create cgroups (cgroup v2 with a
//! writable directory for lockward's own cgroup: root, systemd's
//! `Delegate=yes`, a container given its own cgroup namespace), each command
//! gets `lockward-PID-N` inside lockward's own cgroup. CMD joins it before
//! its exec, so everything it starts is born inside (leaving takes rights
//! over other cgroups), and writing `cgroup.kill` ends all of it in one
//! step: the warden (see [`crate::warden`]) can end the tree even when
//! lockward and the keeper died together.
//!
//! `LOCKWARD_CGROUP=off` turns the layer off; `LOCKWARD_CGROUP=DIR` puts
//! the commands' cgroups under DIR instead.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The environment variable that turns the layer off or moves it.
pub const ENV: &str = "LOCKWARD_CGROUP";

/// One command's cgroup.
#[derive(Debug, Clone)]
pub struct CommandCgroup {
    dir: PathBuf,
}

impl CommandCgroup {
    /// Creates a fresh cgroup for one command; why not, when the machine
    /// does not allow it.
    pub fn create() -> Result<CommandCgroup, String> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let parent = parent()?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("lockward-{}-{n}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&dir) {
            return Err(format!(
                "cannot create a cgroup in {}: {e}",
                parent.display()
            ));
        }
        let cgroup = CommandCgroup { dir };
        if !cgroup.dir.join("cgroup.kill").exists() {
            cgroup.remove();
            return Err("this kernel has no cgroup.kill (Linux 5.14 or later has it)".into());
        }
        Ok(cgroup)
    }

    /// The cgroup at `dir`, made by another lockward process.
    pub fn at(dir: impl Into<PathBuf>) -> CommandCgroup {
        CommandCgroup { dir: dir.into() }
    }

    /// Its directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// What a process about to exec CMD needs to join it (see [`Joiner`]).
    pub fn joiner(&self) -> Joiner {
        Joiner {
            procs: CString::new(self.dir.join("cgroup.procs").as_os_str().as_bytes())
                .unwrap_or_default(),
        }
    }

    /// Ends every process in it (SIGKILL, by the kernel). Harmless when it
    /// is empty or gone.
    pub fn kill(&self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
    }

    /// The processes in it (none once it is gone).
    pub fn members(&self) -> Vec<libc::pid_t> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Whether no process is left in it.
    pub fn is_empty(&self) -> bool {
        match std::fs::read_to_string(self.dir.join("cgroup.events")) {
            Ok(events) => events.lines().any(|l| l.trim() == "populated 0"),
            Err(_) => true,
        }
    }

    /// Kills what is in it and waits until it is empty, for at most
    /// `within`; how many processes it held, and whether it is empty.
    pub fn end(&self, within: Duration) -> (usize, bool) {
        let held = self.members().len();
        let give_up = Instant::now() + within;
        loop {
            if self.is_empty() {
                return (held, true);
            }
            self.kill();
            if Instant::now() >= give_up {
                return (held, false);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Removes it; harmless when it is already gone, and refused by the
    /// kernel while a process is still in it.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Moves the calling process into a cgroup, from between fork and exec:
/// prepared before the fork, it then makes only async-signal-safe calls.
pub struct Joiner {
    procs: CString,
}

impl Joiner {
    /// Joins the cgroup; false when the kernel refused.
    pub fn join(&self) -> bool {
        // SAFETY: open, write and close are async-signal-safe; the path is
        // a valid C string owned by `self`.
        unsafe {
            let fd = libc::open(self.procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return false;
            }
            let written = libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
            written == 1
        }
    }
}

/// Tries the layer for real: a cgroup, a process moved into it before its
/// exec, ended with `cgroup.kill`, the cgroup removed. The cgroups' parent
/// directory, or what failed.
pub fn probe() -> Result<PathBuf, String> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let cgroup = CommandCgroup::create()?;
    let joiner = cgroup.joiner();
    let mut cmd = std::process::Command::new("sleep");
    cmd.arg("30")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    // SAFETY: the joiner makes only async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || match joiner.join() {
            true => Ok(()),
            false => Err(std::io::Error::last_os_error()),
        })
    };
    let result = match cmd.spawn() {
        Err(e) => Err(format!(
            "cannot move a process into {}: {e}",
            cgroup.path().display()
        )),
        Ok(mut child) => {
            let (held, empty) = cgroup.end(Duration::from_secs(5));
            if !empty {
                let _ = child.kill();
            }
            let killed = matches!(child.wait(), Ok(s) if s.signal() == Some(libc::SIGKILL));
            if held == 1 && empty && killed {
                Ok(cgroup
                    .dir
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default())
            } else {
                Err(format!(
                    "cgroup.kill in {} did not end the process in it",
                    cgroup.path().display()
                ))
            }
        }
    };
    cgroup.remove();
    result
}

/// The directory where this process may create cgroups for its commands,
/// or why there is none.
pub fn parent() -> Result<PathBuf, String> {
    match std::env::var_os(ENV) {
        Some(v) if v == "off" => return Err(format!("turned off by {ENV}=off")),
        Some(v) if !v.is_empty() => return checked(PathBuf::from(v)),
        _ => {}
    }
    let (mount, root) = cgroup2_mount().ok_or("no cgroup v2 file system is mounted")?;
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("0::").map(str::to_string))
        })
        .ok_or("this process is in no cgroup v2")?;
    // Inside a cgroup namespace both are relative to its root.
    let relative = own
        .strip_prefix(root.as_str())
        .unwrap_or(&own)
        .trim_start_matches('/');
    checked(mount.join(relative))
}

/// `dir` if it is a cgroup v2 directory this process can write.
fn checked(dir: PathBuf) -> Result<PathBuf, String> {
    if !dir.join("cgroup.procs").exists() {
        return Err(format!("{} is not a cgroup v2 directory", dir.display()));
    }
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: access only reads the path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!(
            "{} is not writable by this user (no delegated cgroup)",
            dir.display()
        ));
    }
    Ok(dir)
}

/// Where cgroup v2 is mounted, and the root of that mount within the
/// hierarchy, from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<(PathBuf, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS… - FSTYPE SOURCE …
        let (before, after) = line.split_once(" - ")?;
        if after.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let fields: Vec<&str> = before.split_whitespace().collect();
        Some((
            PathBuf::from(unescape(fields.get(4)?)),
            unescape(fields.get(3)?),
        ))
    })
}

/// mountinfo writes space, tab, newline and backslash as octal escapes.
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}
