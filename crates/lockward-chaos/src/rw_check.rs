//! I7, judged from the read-write workload's history: a reader that held
//! the read side for the whole of its read never saw a half-done write of a
//! writer that held the write side for the whole of its writes.
//!
//! Writers set both registers to their fence; a read that found them
//! different (a torn read) saw the writer with the larger of the two fences
//! between its writes. That can happen without a bug only when the reader
//! read past its lease's local deadline, or that writer's writes did not
//! all land within its own (it was paused mid-write, or died, and another
//! holder came meanwhile), or a fault ended every lease early between that
//! writer's grant and the read (a restart without persistence, a server
//! clock jumped forward): such torn reads are counted as excused. A writer
//! or reader an operator ended (a forced unlock) holds until the unlock
//! began, by the operator's decision.

use crate::history::{cut_at_unlocks, Ended, Kind, Op, Outcome};

/// What the checker found in the read-write workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RwFindings {
    /// Reads that completed.
    pub reads: u64,
    /// Reads that saw the registers differ.
    pub torn: u64,
    /// Torn reads explained by a lease that ran out (the reader's, or the
    /// writer's mid-write).
    pub excused: u64,
    /// Torn reads with both leases live: must be 0.
    pub violations: u64,
}

/// Judges `ops` (writers' and readers' together; writers' fences are the
/// values they wrote); `forgotten`: when a fault ended every lease early
/// (ns on the monotonic clock); `ended`: the holds forced unlocks ended.
pub fn check_rw(ops: &[Op], forgotten: &[u64], ended: &[Ended]) -> RwFindings {
    let ops = &cut_at_unlocks(ops, ended);
    let mut f = RwFindings::default();
    let grants: Vec<&Op> = ops
        .iter()
        .filter(|o| o.kind == Kind::Acquire && o.outcome == Outcome::Ok)
        .collect();
    for read in ops
        .iter()
        .filter(|o| o.kind == Kind::Read && o.outcome == Outcome::Ok)
    {
        f.reads += 1;
        if read.value == read.seen {
            continue;
        }
        f.torn += 1;
        // The reader's grant: its latest one with this fence before it.
        let reader_late = grants
            .iter()
            .filter(|g| g.client == read.client && g.fence == read.fence && g.end <= read.start)
            .max_by_key(|g| g.end)
            .is_none_or(|g| g.value == 0 || read.end > g.value);
        let writer = read.value.max(read.seen);
        let forgot = grants
            .iter()
            .find(|g| g.fence == writer)
            .is_some_and(|g| forgotten.iter().any(|t| (g.start..=read.end).contains(t)));
        if reader_late || forgot || writer_late(ops, &grants, writer) {
            f.excused += 1;
        } else {
            f.violations += 1;
        }
    }
    f
}

/// Whether the writer with fence `fence` did not finish both writes within
/// its lease's local deadline.
fn writer_late(ops: &[Op], grants: &[&Op], fence: u64) -> bool {
    let Some(grant) = grants.iter().find(|g| g.fence == fence) else {
        // Its grant was not recorded (killed at once): nothing proves it live.
        return true;
    };
    let writes: Vec<&Op> = ops
        .iter()
        .filter(|o| o.kind == Kind::Write && o.fence == fence && o.client == grant.client)
        .collect();
    let landed = writes.iter().filter(|w| w.outcome == Outcome::Ok).count();
    landed < 2 || grant.value == 0 || writes.iter().any(|w| w.end > grant.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: u32, kind: Kind, fence: u64, start: u64, end: u64, value: u64, seen: u64) -> Op {
        Op {
            seen,
            ..crate::history::ok_op(client, kind, fence, start, end, value)
        }
    }

    #[test]
    fn a_torn_read_between_live_leases_is_a_violation() {
        let ops = vec![
            // Writer 0, fence 5, deadline 1000, both writes in time.
            op(0, Kind::Acquire, 5, 0, 10, 1_000, 0),
            op(0, Kind::Write, 5, 20, 30, 5, 0),
            op(0, Kind::Write, 5, 200, 210, 5, 0),
            // Reader 1, fence 6, deadline 1000, reads a = 5, b = 0.
            op(1, Kind::Acquire, 6, 40, 50, 1_000, 0),
            op(1, Kind::Read, 6, 60, 70, 5, 0),
            // A whole read.
            op(1, Kind::Read, 6, 300, 310, 5, 5),
        ];
        let f = check_rw(&ops, &[], &[]);
        assert_eq!((f.reads, f.torn, f.excused, f.violations), (2, 1, 0, 1));
        // The store forgot every lock between the writer's grant and the read.
        let f = check_rw(&ops, &[35], &[]);
        assert_eq!((f.torn, f.excused, f.violations), (1, 1, 0));
        // An operator ended the writer between its writes...
        let unlock = |fence, from| Ended {
            fence,
            from,
            to: from + 5,
        };
        let f = check_rw(&ops, &[], &[unlock(5, 100)]);
        assert_eq!((f.torn, f.excused, f.violations), (1, 1, 0));
        // ... or after both landed, which excuses nothing.
        let f = check_rw(&ops, &[], &[unlock(5, 250)]);
        assert_eq!((f.torn, f.excused, f.violations), (1, 0, 1));
    }

    #[test]
    fn a_writer_paused_mid_write_excuses_the_torn_read() {
        let ops = vec![
            // Writer 0's second write lands after its deadline (100).
            op(0, Kind::Acquire, 5, 0, 10, 100, 0),
            op(0, Kind::Write, 5, 20, 30, 5, 0),
            op(0, Kind::Write, 5, 500, 510, 5, 0),
            op(1, Kind::Acquire, 6, 200, 210, 1_000, 0),
            op(1, Kind::Read, 6, 220, 230, 5, 0),
            // Writer 3 in time; reader 2 reads past its own deadline.
            op(3, Kind::Acquire, 8, 600, 605, 10_000, 0),
            op(3, Kind::Write, 8, 610, 620, 8, 0),
            op(3, Kind::Write, 8, 900, 910, 8, 0),
            op(2, Kind::Acquire, 9, 600, 610, 650, 0),
            op(2, Kind::Read, 9, 640, 700, 8, 0),
        ];
        let f = check_rw(&ops, &[], &[]);
        assert_eq!((f.torn, f.excused, f.violations), (2, 2, 0));
    }
}
