//! The report of one run: a table for people, one JSON object for scripts.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::checker::Findings;
use crate::target::FaultKind;

/// What a run found, and its verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The backend.
    pub backend: String,
    /// The seed of the fault schedule.
    pub seed: u64,
    /// How long the clients ran, ms.
    pub duration_ms: u64,
    /// The fenced register's workload used the fence-ignoring register.
    pub mutant: bool,
    /// Operations that happened, over every workload.
    pub ops_ok: u64,
    /// Operations that surely did not happen.
    pub ops_failed: u64,
    /// Operations with an unknown outcome.
    pub ops_indeterminate: u64,
    /// Faults by kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// Total time each kind of fault lasted, ms.
    pub fault_ms: BTreeMap<FaultKind, u64>,
    /// Stale writes accepted (fenced workload and election): must be 0.
    pub stale_accepted: u64,
    /// Stale writes the register refused.
    pub stale_rejected: u64,
    /// Accepted writes lost (fenced workload and election): must be 0.
    pub lost_updates: u64,
    /// Grants out of order or with a repeated fence or epoch: must be 0.
    pub order_violations: u64,
    /// The positive control (locks without fences): overlapping critical
    /// sections found.
    pub unfenced_overlaps: u64,
    /// Their total time, ms.
    pub unfenced_overlap_ms: u64,
    /// The positive control's lost updates.
    pub unfenced_lost_updates: u64,
    /// Time from a fault's healing to the next acquisition, ms.
    pub recovery_ms_p50: u64,
    /// The same, 99th percentile.
    pub recovery_ms_p99: u64,
    /// The same, worst.
    pub recovery_ms_max: u64,
    /// What I6 allows: TTL + the backend's failover time, ms.
    pub recovery_budget_ms: u64,
    /// Reads of the read-write workload.
    pub rw_reads: u64,
    /// Of those, reads that saw a half-done write.
    pub rw_torn_reads: u64,
    /// Torn reads explained by a lease that ran out (the reader's, or the
    /// writer's mid-write).
    pub rw_torn_excused: u64,
    /// I7: torn reads with both leases live: must be 0.
    pub rw_torn_violations: u64,
    /// Executions of the cron workload.
    pub cron_executions: u64,
    /// I8: pairs of them that ran at once within their leases: must be 0.
    pub cron_overlaps: u64,
    /// Pairs that ran at once after a fault ended every lease early (a
    /// restart without persistence, a server clock jump).
    pub cron_overlaps_excused: u64,
    /// Locks the served clients (through `lockward serve`) took, judged
    /// with the fenced workload's.
    pub served_holds: u64,
    /// Permits granted in the semaphore workload.
    pub sem_holds: u64,
    /// The most holders of the semaphore at once, within their leases.
    pub sem_most_at_once: u64,
    /// I9: holds granted while every permit was held: must be 0.
    pub sem_over_permits: u64,
    /// Such holds after a fault ended every lease early.
    pub sem_over_excused: u64,
    /// The first crowds of the semaphore (over its permits, excused or
    /// not), each with its holds: what a failed I9 is read from.
    pub sem_crowds: Vec<String>,
    /// Where the histories were kept (a failed verdict keeps them).
    pub kept_in: Option<String>,
    /// Rows the guarded workload's commands wrote to the guarded table.
    pub guarded_rows: u64,
    /// I10: of them, rows written after a newer fence's command had
    /// started: must be 0.
    pub guarded_stale: u64,
    /// Writes the database refused as stale.
    pub guarded_refused: u64,
    /// The same rows in the unguarded table, written that late (the
    /// control: the faults bite when above 0).
    pub guarded_control_stale: u64,
    /// The longest a client wrote after its lease's local deadline, ms.
    pub acted_after_deadline_ms: u64,
    /// `passed`, `failed` or `unjudged`.
    pub verdict: String,
    /// Why, when not passed.
    pub reasons: Vec<String>,
    /// Every fault with its proof.
    pub fault_log: Vec<crate::target::FaultRecord>,
}

/// Fills the verdict from the findings of each workload.
pub fn judge(report: &mut Report, fenced: &Findings, election: &Findings, control: &Findings) {
    let mut reasons = Vec::new();
    for (what, f) in [("fenced", fenced), ("election", election)] {
        if f.stale_accepted > 0 {
            reasons.push(format!(
                "I1/I5: {what}: {} stale writes accepted",
                f.stale_accepted
            ));
        }
        if f.lost_updates > 0 {
            reasons.push(format!(
                "I1: {what}: {} accepted writes lost",
                f.lost_updates
            ));
        }
        if f.order_violations > 0 {
            reasons.push(format!(
                "I2/I5: {what}: {} grants out of fence order",
                f.order_violations
            ));
        }
    }
    if report.rw_torn_violations > 0 {
        reasons.push(format!(
            "I7: {} reads saw a half-done write while reader and writer both held their leases",
            report.rw_torn_violations
        ));
    }
    if report.cron_overlaps > 0 {
        reasons.push(format!(
            "I8: {} pairs of cron executions ran at once within their leases",
            report.cron_overlaps
        ));
    }
    if report.sem_over_permits > 0 {
        reasons.push(format!(
            "I9: {} permits granted while every permit was held within its lease: {}",
            report.sem_over_permits,
            report.sem_crowds.join("; ")
        ));
    }
    if report.guarded_stale > 0 {
        reasons.push(format!(
            "I10: {} rows reached the guarded table after a newer fence was claimed",
            report.guarded_stale
        ));
    }
    if report.recovery_ms_max > report.recovery_budget_ms {
        reasons.push(format!(
            "I6: recovery took {} ms, over TTL + failover ({} ms)",
            report.recovery_ms_max, report.recovery_budget_ms
        ));
    }
    report.verdict = if !reasons.is_empty() {
        "failed"
    } else if control.overlaps == 0 && control.lost_updates == 0 {
        reasons.push(
            "I3: the positive control found no overlap or lost update: the faults did not bite"
                .into(),
        );
        "unjudged"
    } else {
        "passed"
    }
    .to_string();
    report.reasons = reasons;
}

/// The human-readable table.
pub fn table(r: &Report) -> String {
    let mut out = String::new();
    let line = |out: &mut String, k: &str, v: String| out.push_str(&format!("{k:<34} {v}\n"));
    line(
        &mut out,
        "backend",
        format!(
            "{}{}",
            r.backend,
            if r.mutant { " (mutant register)" } else { "" }
        ),
    );
    line(&mut out, "seed", r.seed.to_string());
    line(&mut out, "duration", format!("{} ms", r.duration_ms));
    line(
        &mut out,
        "operations ok / failed / indeterminate",
        format!("{} / {} / {}", r.ops_ok, r.ops_failed, r.ops_indeterminate),
    );
    for (kind, n) in &r.faults {
        line(
            &mut out,
            &format!("fault {kind:?}"),
            format!(
                "{n} ({} ms in all)",
                r.fault_ms.get(kind).copied().unwrap_or(0)
            ),
        );
    }
    line(
        &mut out,
        "stale writes accepted / rejected",
        format!("{} / {}", r.stale_accepted, r.stale_rejected),
    );
    line(
        &mut out,
        "lost updates (fenced)",
        r.lost_updates.to_string(),
    );
    line(
        &mut out,
        "fence order violations",
        r.order_violations.to_string(),
    );
    line(
        &mut out,
        "control: overlaps (total)",
        format!("{} ({} ms)", r.unfenced_overlaps, r.unfenced_overlap_ms),
    );
    line(
        &mut out,
        "control: lost updates",
        r.unfenced_lost_updates.to_string(),
    );
    line(
        &mut out,
        "read-write: reads / torn (excused)",
        format!(
            "{} / {} ({})",
            r.rw_reads, r.rw_torn_reads, r.rw_torn_excused
        ),
    );
    line(
        &mut out,
        "cron: executions / overlapping (excused)",
        format!(
            "{} / {} ({})",
            r.cron_executions, r.cron_overlaps, r.cron_overlaps_excused
        ),
    );
    line(
        &mut out,
        "locks taken through lockward serve",
        r.served_holds.to_string(),
    );
    line(
        &mut out,
        "semaphore: holds / most at once / over the permits (excused)",
        format!(
            "{} / {} / {} ({})",
            r.sem_holds, r.sem_most_at_once, r.sem_over_permits, r.sem_over_excused
        ),
    );
    for crowd in &r.sem_crowds {
        line(&mut out, "semaphore: a crowd", crowd.clone());
    }
    if let Some(dir) = &r.kept_in {
        line(&mut out, "histories kept in", dir.clone());
    }
    line(
        &mut out,
        "guarded table: rows / stale / refused (control: stale)",
        format!(
            "{} / {} / {} ({})",
            r.guarded_rows, r.guarded_stale, r.guarded_refused, r.guarded_control_stale
        ),
    );
    line(
        &mut out,
        "recovery p50 / p99 / max",
        format!(
            "{} / {} / {} ms (budget {} ms)",
            r.recovery_ms_p50, r.recovery_ms_p99, r.recovery_ms_max, r.recovery_budget_ms
        ),
    );
    line(
        &mut out,
        "longest write after the deadline",
        format!("{} ms", r.acted_after_deadline_ms),
    );
    line(&mut out, "verdict", r.verdict.clone());
    for reason in &r.reasons {
        line(&mut out, "", reason.clone());
    }
    out
}
