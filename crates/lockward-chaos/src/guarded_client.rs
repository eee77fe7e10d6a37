//! The guarded workload's clients: each runs `lockward run chaos-guarded
//! --fence-db DB -- lockward-chaos guarded-write …` over and over, and that
//! command writes rows with `psql`, which knows nothing of lockward: the
//! fence reaches the database only through the `PGOPTIONS` lockward set.
//! Each row goes to a guarded table and to a plain one (the control).
//!
//! What the checker needs is written as it happens: the command's start
//! with its fence (after lockward's claim), and in each row the moment
//! just before its `psql` started (see [`crate::guarded_check`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::history::mono_ns;
use crate::workload::TTL;

/// The lock every guarded client takes.
pub const LOCK: &str = "chaos-guarded";
/// The table the database guards by [`LOCK`]'s fence.
pub const GUARDED: &str = "chaos_guarded";
/// The same rows, unguarded: the control.
pub const PLAIN: &str = "chaos_plain";
/// The file of command starts, `fence mono_ns` per line.
pub const STARTS: &str = "guarded-starts";
/// The file of writes the database refused as stale, one line each.
pub const REFUSED: &str = "guarded-refused";

/// Where the harness tells clients the `lockward` binary and the guarded
/// database are.
pub const LOCKWARD_ENV: &str = "LOCKWARD_CHAOS_LOCKWARD";
pub const FENCE_DB_ENV: &str = "LOCKWARD_CHAOS_FENCE_DB";

/// The file naming the `lockward run` a client has running, for the
/// harness to pause the whole tree.
pub fn run_file(dir: &Path, client_pid: u32) -> PathBuf {
    dir.join(format!("guarded-run-{client_pid}"))
}

/// The file naming the command a client's `lockward run` started last,
/// for the harness to resume the command alone.
pub fn command_file(dir: &Path, client_pid: u32) -> PathBuf {
    dir.join(format!("guarded-command-{client_pid}"))
}

/// How the command learns its client's pid (through `lockward run`).
const CLIENT_PID_ENV: &str = "LOCKWARD_CHAOS_CLIENT_PID";

/// Runs client `index` until `until` or the stop file.
pub async fn run(url: &str, index: u32, dir: &Path, until: u64) -> Result<(), String> {
    let lockward = std::env::var(LOCKWARD_ENV).map_err(|_| format!("{LOCKWARD_ENV} unset"))?;
    let db = std::env::var(FENCE_DB_ENV).map_err(|_| format!("{FENCE_DB_ENV} unset"))?;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let stop = dir.join("stop");
    while mono_ns() < until && !stop.exists() {
        let mut child = Command::new(&lockward)
            .args(["--store", url, "run", LOCK])
            .args(["--ttl", &format!("{}ms", TTL.as_millis())])
            .args(["--wait", "3s", "--fence-db", &db, "--"])
            .arg(&me)
            .args(["guarded-write", "--db", &db, "--client", &index.to_string()])
            .arg("--dir")
            .arg(dir)
            .env(CLIENT_PID_ENV, std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start lockward: {e}"))?;
        let _ = std::fs::write(run_file(dir, std::process::id()), child.id().to_string());
        // Exit statuses are not judged: a run that lost its lock or could
        // not claim (76, 75) is part of the chaos; rows are what count.
        let _ = tokio::task::block_in_place(|| child.wait());
        let _ = std::fs::remove_file(dir.join(format!("holding-{}", std::process::id())));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The command under `lockward run`: notes its start and fence, then
/// writes three rows, each with `psql` into the plain table and then the
/// guarded one, a little apart.
pub fn write(db: &str, client: u32, dir: &Path) -> Result<(), String> {
    let fence: u64 = std::env::var("LOCKWARD_FENCE")
        .map_err(|_| "LOCKWARD_FENCE unset".to_string())?
        .parse()
        .map_err(|_| "LOCKWARD_FENCE is not a number".to_string())?;
    // The harness pauses a client while its command runs (`holding-`),
    // and resumes this command alone (`guarded-command-`).
    let client_pid: Option<u32> = std::env::var(CLIENT_PID_ENV)
        .ok()
        .and_then(|pid| pid.parse().ok());
    if let Some(pid) = client_pid {
        let _ = std::fs::write(command_file(dir, pid), std::process::id().to_string());
        let _ = std::fs::write(dir.join(format!("holding-{pid}")), "");
    }
    append(&dir.join(STARTS), &format!("{fence} {}", mono_ns()))?;
    for _ in 0..3 {
        let noted = mono_ns();
        for table in [PLAIN, GUARDED] {
            let out = Command::new("psql")
                .arg(db)
                .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c"])
                .arg(format!(
                    "INSERT INTO {table} (client, fence, noted) VALUES ({client}, {fence}, {noted})"
                ))
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run psql: {e}"))?;
            if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("stale fence")
            {
                append(&dir.join(REFUSED), &format!("{client} {fence} {noted}"))?;
            }
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    if let Some(pid) = client_pid {
        let _ = std::fs::remove_file(dir.join(format!("holding-{pid}")));
    }
    Ok(())
}

fn append(path: &Path, line: &str) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    // One write per line: lines from several processes never interleave.
    file.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| e.to_string())
}
