//! The history of a run: every operation a client made, with its fence and
//! its start and end on the host's monotonic clock, which every process of
//! the host shares, so real-time order between clients is known exactly.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Nanoseconds on `CLOCK_MONOTONIC`, comparable across the host's processes.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What an operation was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Took the lock (or leadership); `fence` is its token.
    Acquire,
    /// Wrote `value` to the register with `fence`.
    Write,
    /// Released the lock.
    Release,
    /// Read two registers (the read-write workload): `value` and `seen`.
    Read,
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It happened.
    Ok,
    /// It surely did not happen (refused, timed out before sending).
    Failed,
    /// The register refused a stale fence.
    Stale,
    /// It may or may not have happened (the store did not answer).
    Indeterminate,
}

/// One operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// The client process (0-based).
    pub client: u32,
    /// What it was.
    pub kind: Kind,
    /// How it ended.
    pub outcome: Outcome,
    /// The fence (or epoch) it carried.
    pub fence: u64,
    /// Start, ns on the monotonic clock.
    pub start: u64,
    /// End, ns on the monotonic clock.
    pub end: u64,
    /// For writes: the value written; for acquisitions: the lease's local
    /// deadline (ns on the monotonic clock); for reads: the first register.
    pub value: u64,
    /// For reads: the second register (0 otherwise).
    #[serde(default)]
    pub seen: u64,
}

/// Appends operations to a client's history file, one JSON line each.
pub struct Recorder {
    file: std::fs::File,
}

impl Recorder {
    /// Opens (creates) `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Recorder> {
        Ok(Recorder {
            file: std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?,
        })
    }

    /// Records `op` at once (a client may be killed at any moment).
    pub fn record(&mut self, op: &Op) {
        if let Ok(line) = serde_json::to_string(op) {
            let _ = self.file.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// Reads every client's history in `dir` (files `client-*.jsonl`).
pub fn load(dir: &Path) -> Vec<Op> {
    let mut ops = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return ops;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("client-") && name.ends_with(".jsonl")) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        // A line cut short by a kill is dropped.
        ops.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
    }
    ops.sort_by_key(|o| (o.start, o.client));
    ops
}
