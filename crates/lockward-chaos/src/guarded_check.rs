//! I10, judged from the guarded workload without trusting the trigger:
//! no committed row carries a fence older than one a command was already
//! running under when that row's `psql` started.
//!
//! A command starts only after lockward claimed its fence in the database,
//! and a row's moment is noted before its `psql` starts; so a row noted
//! after a command of a newer fence started was written after that claim,
//! and the database must have refused it. Moments are one host's monotonic
//! clock, so no server clock (jumped or not) takes part. The plain table
//! gets the same rows unguarded: there such rows show the faults bite.

/// What the checker found in one table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuardedFindings {
    /// Rows in the table.
    pub rows: u64,
    /// Rows written after a newer fence's command had started.
    pub stale: u64,
}

/// Judges `rows` (`fence`, noted ns) against the command starts
/// (`fence`, started ns).
pub fn check_guarded(rows: &[(u64, u64)], starts: &[(u64, u64)]) -> GuardedFindings {
    let mut starts = starts.to_vec();
    starts.sort_by_key(|&(_, at)| at);
    // The highest fence started by each moment.
    let mut highest = Vec::with_capacity(starts.len());
    let mut most = 0;
    for &(fence, at) in &starts {
        most = most.max(fence);
        highest.push((at, most));
    }
    let stale = rows
        .iter()
        .filter(|&&(fence, noted)| {
            let before = highest.partition_point(|&(at, _)| at < noted);
            before > 0 && highest[before - 1].1 > fence
        })
        .count() as u64;
    GuardedFindings {
        rows: rows.len() as u64,
        stale,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_noted_after_a_newer_fence_started_is_stale() {
        let starts = [(1, 100), (2, 500), (3, 900)];
        // Fence 1 before 2 started; fence 2 until 3 started.
        let fine = [(1, 150), (1, 499), (2, 600), (3, 950)];
        assert_eq!(check_guarded(&fine, &starts).stale, 0);
        // Fence 1 after fence 2 started; fence 2 after fence 3 started.
        let late = [(1, 501), (2, 901), (3, 950)];
        let found = check_guarded(&late, &starts);
        assert_eq!((found.rows, found.stale), (3, 2));
    }
}
