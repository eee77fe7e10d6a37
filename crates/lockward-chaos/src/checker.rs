//! The invariants, judged from a history alone.
//!
//! - I1: with fencing, no stale write accepted, and the register's final
//!   value equals the number of accepted writes (none lost).
//! - I2: fences strictly increase in the order the store granted them: a
//!   grant that ended before another began has the smaller fence.
//! - I3 (positive control): without fencing, with pauses past the TTL, the
//!   checker finds overlapping critical sections or lost updates; if it
//!   finds none, the run is unjudged.
//! - I5: at most one leader per epoch, and no write accepted with an old
//!   epoch (I1 and I2 applied to the election workload).

use crate::history::{Kind, Op, Outcome};

/// What the checker found in one workload's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// Operations that happened.
    pub ops_ok: u64,
    /// Operations that surely did not happen (stale writes included).
    pub ops_failed: u64,
    /// Operations whose outcome is unknown.
    pub ops_indeterminate: u64,
    /// Writes accepted although a later holder had the lock before they
    /// began.
    pub stale_accepted: u64,
    /// Writes the register refused as stale.
    pub stale_rejected: u64,
    /// Accepted writes missing from the register's final value.
    pub lost_updates: u64,
    /// Pairs of critical sections (grant end to write end) that overlapped,
    /// and their total overlap in ns.
    pub overlaps: u64,
    /// Total time of those overlaps, ns.
    pub overlap_ns: u64,
    /// Grants whose fence was not above that of a grant that ended before
    /// they began, or that repeated another grant's fence.
    pub order_violations: u64,
    /// The longest a client went on writing after its lease's local
    /// deadline, ns.
    pub acted_after_deadline_ns: u64,
}

/// A critical section: from a grant's end to the end of the write under it.
struct Section {
    client: u32,
    fence: u64,
    from: u64,
    to: u64,
}

/// Judges `ops` (one workload, all clients), given the register's final
/// value.
pub fn check(ops: &[Op], final_value: u64) -> Findings {
    let mut f = Findings::default();
    for op in ops {
        match op.outcome {
            Outcome::Ok => f.ops_ok += 1,
            Outcome::Failed | Outcome::Stale => f.ops_failed += 1,
            Outcome::Indeterminate => f.ops_indeterminate += 1,
        }
    }
    let mut grants: Vec<&Op> = ops
        .iter()
        .filter(|o| o.kind == Kind::Acquire && o.outcome == Outcome::Ok)
        .collect();
    grants.sort_by_key(|g| g.end);

    // I2: walk grants by start; every grant that ended before must have a
    // smaller fence.
    let mut by_start: Vec<&Op> = grants.clone();
    by_start.sort_by_key(|g| g.start);
    let mut ended = 0;
    let mut max_before = 0u64;
    for g in &by_start {
        while ended < grants.len() && grants[ended].end < g.start {
            max_before = max_before.max(grants[ended].fence);
            ended += 1;
        }
        if g.fence <= max_before {
            f.order_violations += 1;
        }
    }
    let mut fences: Vec<(u64, u32, u64)> = grants
        .iter()
        .map(|g| (g.fence, g.client, g.start))
        .collect();
    fences.sort();
    f.order_violations += fences
        .windows(2)
        .filter(|w| w[0].0 == w[1].0 && (w[0].1 != w[1].1 || w[0].2 != w[1].2))
        .count() as u64;

    // Writes: stale when a grant with a larger fence ended before the write
    // began.
    let mut sections = Vec::new();
    let mut accepted = 0u64;
    for w in ops.iter().filter(|o| o.kind == Kind::Write) {
        let idx = grants.partition_point(|g| g.end < w.start);
        let newer_before = grants[..idx].iter().any(|g| g.fence > w.fence);
        match w.outcome {
            Outcome::Ok => {
                accepted += 1;
                if newer_before {
                    f.stale_accepted += 1;
                }
            }
            Outcome::Stale => f.stale_rejected += 1,
            _ => {}
        }
        // Its grant: the same client's latest grant with this fence.
        if let Some(g) = grants
            .iter()
            .filter(|g| g.client == w.client && g.fence == w.fence && g.end <= w.start)
            .max_by_key(|g| g.end)
        {
            if w.outcome == Outcome::Ok {
                sections.push(Section {
                    client: w.client,
                    fence: w.fence,
                    from: g.end,
                    to: w.end,
                });
            }
            // `value` of a grant is its local deadline.
            if g.value > 0 && w.end > g.value {
                f.acted_after_deadline_ns = f.acted_after_deadline_ns.max(w.end - g.value);
            }
        }
    }
    let indeterminate_writes = ops
        .iter()
        .filter(|o| o.kind == Kind::Write && o.outcome == Outcome::Indeterminate)
        .count() as u64;
    // Each accepted write stored read + 1: with none lost the final value
    // is at least the number accepted (indeterminate ones may add more).
    f.lost_updates = accepted.saturating_sub(final_value);
    let _ = indeterminate_writes;

    sections.sort_by_key(|s| s.from);
    for (i, a) in sections.iter().enumerate() {
        for b in &sections[i + 1..] {
            if b.from >= a.to {
                break;
            }
            if a.client != b.client && a.fence != b.fence {
                f.overlaps += 1;
                f.overlap_ns += a.to.min(b.to) - b.from;
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: u32, kind: Kind, outcome: Outcome, fence: u64, start: u64, end: u64) -> Op {
        Op {
            client,
            kind,
            outcome,
            fence,
            start,
            end,
            value: 0,
            seen: 0,
        }
    }

    #[test]
    fn a_clean_history_passes() {
        let ops = vec![
            op(0, Kind::Acquire, Outcome::Ok, 1, 0, 10),
            op(0, Kind::Write, Outcome::Ok, 1, 20, 30),
            op(0, Kind::Release, Outcome::Ok, 1, 31, 35),
            op(1, Kind::Acquire, Outcome::Ok, 2, 5, 40),
            op(1, Kind::Write, Outcome::Ok, 2, 45, 50),
        ];
        let f = check(&ops, 2);
        assert_eq!(
            (
                f.stale_accepted,
                f.lost_updates,
                f.overlaps,
                f.order_violations
            ),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn a_paused_holders_late_write_is_found() {
        // Client 0 is paused after its grant; client 1 takes the lock with
        // fence 2 and writes; client 0's write with fence 1 comes later.
        let ops = vec![
            op(0, Kind::Acquire, Outcome::Ok, 1, 0, 10),
            op(1, Kind::Acquire, Outcome::Ok, 2, 50, 60),
            op(1, Kind::Write, Outcome::Ok, 2, 70, 80),
            op(0, Kind::Write, Outcome::Ok, 1, 100, 110),
        ];
        let accepted = check(&ops, 1);
        assert_eq!(accepted.stale_accepted, 1);
        assert_eq!(accepted.lost_updates, 1);
        assert_eq!(accepted.overlaps, 1);
        let mut refused = ops.clone();
        refused[3].outcome = Outcome::Stale;
        let f = check(&refused, 1);
        assert_eq!(
            (f.stale_accepted, f.stale_rejected, f.lost_updates),
            (0, 1, 0)
        );
    }

    #[test]
    fn fences_out_of_grant_order_are_found() {
        let ops = vec![
            op(0, Kind::Acquire, Outcome::Ok, 5, 0, 10),
            op(1, Kind::Acquire, Outcome::Ok, 3, 20, 30),
            op(2, Kind::Acquire, Outcome::Ok, 3, 40, 50),
        ];
        assert_eq!(check(&ops, 0).order_violations, 3);
    }
}
