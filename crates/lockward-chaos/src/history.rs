//! The history of a run: every operation a client made, with its fence and
//! its start and end on the host's monotonic clock, which every process of
//! the host shares, so real-time order between clients is known exactly.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// One hold of a workload whose grants record their lease's local
/// deadline as `value` (cron, semaphore), ns on the monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Held {
    /// When the holder was told it holds (the grant returned).
    pub from: u64,
    /// The start of its release, or its deadline if that came first (after
    /// it, the holder has no claim).
    pub to: u64,
    /// When it asked: the store may have granted it at any moment from
    /// here to `from`, so a server that forgot its locks in between may
    /// have forgotten this hold too, although its holder learned of it
    /// after that.
    pub asked: u64,
    /// The client that held.
    pub client: u32,
    /// Its fence.
    pub fence: u64,
}

/// The holds in `ops`: how many were granted, and each one that lasted
/// (sorted by `from`).
pub fn held_spans(ops: &[Op]) -> (u64, Vec<Held>) {
    let mut granted = 0;
    let mut spans = Vec::new();
    for grant in ops
        .iter()
        .filter(|o| o.kind == Kind::Acquire && o.outcome == Outcome::Ok)
    {
        granted += 1;
        let end = ops
            .iter()
            .filter(|o| o.kind == Kind::Release && o.client == grant.client)
            .filter(|o| o.fence == grant.fence && o.start >= grant.end)
            .map(|o| o.start)
            .min()
            .unwrap_or(u64::MAX);
        let to = end.min(grant.value);
        if to > grant.end {
            spans.push(Held {
                from: grant.end,
                to,
                asked: grant.start,
                client: grant.client,
                fence: grant.fence,
            });
        }
    }
    spans.sort();
    (granted, spans)
}

/// The first of `forgotten` (moments a fault made the store forget every
/// lock) that falls between `asked`, when the earliest of some holds was
/// asked for, and `from`, when a later hold began: those holds may
/// overlap by the fault, not by the store's fault.
pub fn forgotten_between(forgotten: &[u64], asked: u64, from: u64) -> Option<u64> {
    forgotten
        .iter()
        .copied()
        .filter(|t| (asked..=from).contains(t))
        .min()
}

/// A hold an operator ended (`Store::force_unlock`): the fence its row
/// showed, and when the unlock began and returned (ns on the monotonic
/// clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// The fence its row showed.
    pub fence: u64,
    /// When the forced unlock began.
    pub from: u64,
    /// When it returned.
    pub to: u64,
}

/// `ops` with the grants an operator ended ending where the unlock began:
/// a grant's `value` (its lease's local deadline) is cut there, so the
/// checks count its hold, reads and writes after it as past its lease. A
/// grant counts as ended by an unlock of its fence that it asked before
/// the unlock returned (a later grant of the same fence, a ledger slot's,
/// is another holder). Fences are unique per lock, semaphore and
/// read-write lock, and per slot in a semaphore's ledger: there two
/// holders live at once may share one, and both count as ended (the
/// lenient side).
pub fn cut_at_unlocks(ops: &[Op], ended: &[Ended]) -> Vec<Op> {
    ops.iter()
        .map(|o| {
            let grant = o.kind == Kind::Acquire && o.outcome == Outcome::Ok;
            let at = ended
                .iter()
                .filter(|e| grant && e.fence == o.fence && o.start <= e.to)
                .map(|e| e.from)
                .min();
            Op {
                value: at.map_or(o.value, |at| o.value.min(at)),
                ..o.clone()
            }
        })
        .collect()
}

/// An operation that went through, for the checkers' tests.
/// Nanoseconds on the monotonic clock at `at`.
pub(crate) fn mono_at(at: Instant) -> u64 {
    let now = Instant::now();
    let now_ns = mono_ns();
    if at >= now {
        now_ns + (at - now).as_nanos() as u64
    } else {
        now_ns.saturating_sub((now - at).as_nanos() as u64)
    }
}

pub(crate) fn outcome_of(e: &lockward::Error) -> Outcome {
    match e {
        lockward::Error::Stale { .. } => Outcome::Stale,
        lockward::Error::Unavailable { .. } | lockward::Error::Protocol { .. } => {
            Outcome::Indeterminate
        }
        _ => Outcome::Failed,
    }
}

#[cfg(test)]
pub(crate) fn ok_op(client: u32, kind: Kind, fence: u64, start: u64, end: u64, value: u64) -> Op {
    Op {
        client,
        kind,
        outcome: Outcome::Ok,
        fence,
        start,
        end,
        value,
        seen: 0,
    }
}

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
