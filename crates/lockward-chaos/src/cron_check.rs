//! I8, judged from the cron workload's history: under the forbid overlap
//! policy no two executions of the job ran at the same time while both
//! held their leases.
//!
//! An execution runs from its grant to the start of its release; only the
//! part before its lease's local deadline counts (an instance paused past
//! its deadline has no claim to exclusion after it). An overlap is excused
//! when a fault ended every lease early between the first's request and
//! the second's grant (a restart without persistence, a server clock
//! jumped forward: one of `forgotten`); only fences protect across that.

use crate::history::{forgotten_between, held_spans, Op};

/// What the checker found in the cron workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CronFindings {
    /// Executions that started.
    pub executions: u64,
    /// Pairs of executions that overlapped within their leases: must be 0.
    pub overlaps: u64,
    /// Overlaps after a fault ended the first one's lease early.
    pub excused: u64,
}

/// Judges `ops` (every instance's); `forgotten`: when a fault ended every
/// lease early (ns on the monotonic clock).
pub fn check_cron(ops: &[Op], forgotten: &[u64]) -> CronFindings {
    let (executions, runs) = held_spans(ops);
    let mut f = CronFindings {
        executions,
        ..CronFindings::default()
    };
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if b.from >= a.to {
                break;
            }
            if forgotten_between(forgotten, a.asked.min(b.asked), b.from).is_some() {
                f.excused += 1;
            } else {
                f.overlaps += 1;
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{ok_op as op, Kind};

    #[test]
    fn executions_one_after_another_pass_and_overlaps_are_found() {
        let apart = vec![
            op(0, Kind::Acquire, 1, 0, 10, 1_000),
            op(0, Kind::Release, 1, 500, 510, 0),
            op(1, Kind::Acquire, 2, 600, 610, 2_000),
            op(1, Kind::Release, 2, 900, 910, 0),
        ];
        let f = check_cron(&apart, &[]);
        assert_eq!((f.executions, f.overlaps), (2, 0));
        let mut together = apart.clone();
        together[1].start = 700;
        assert_eq!(check_cron(&together, &[]).overlaps, 1);
        // The store forgot the first's locks before the second took them.
        let forgot = check_cron(&together, &[300]);
        assert_eq!((forgot.overlaps, forgot.excused), (0, 1));
        // Asked before the store forgot, told after: the first may have
        // been forgotten too.
        let told_late = check_cron(&together, &[5]);
        assert_eq!((told_late.overlaps, told_late.excused), (0, 1));
        assert_eq!(check_cron(&together, &[701]).overlaps, 1);
        // Past its deadline (400) the first no longer counts.
        together[0].value = 400;
        assert_eq!(check_cron(&together, &[]).overlaps, 0);
    }
}
