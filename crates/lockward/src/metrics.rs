//! What lockward counts, through the `metrics` facade: every metric's name
//! and labels are written here once, and the library calls these functions
//! where things happen. Without an installed recorder (the CLI's
//! `--metrics`, or an exporter your application installs) each call costs
//! a check and does nothing.
//!
//! | metric | labels | what |
//! | --- | --- | --- |
//! | `lockward_acquisitions_total` | `store`, `outcome` (`granted`, `busy`, `timed_out`, `error`) | acquisitions, by how they ended |
//! | `lockward_acquire_seconds` | `store` | time to an acquisition's outcome, waiting included (histogram) |
//! | `lockward_held_seconds` | `store` | how long each lock was held, at release or loss (histogram) |
//! | `lockward_held` | `store` | locks this process holds now (gauge) |
//! | `lockward_waiting` | `store` | acquisitions of this process waiting now (gauge) |
//! | `lockward_lost_total` | `store`, `reason` (`expired`, `taken_over`, `session_ended`, `forced_unlock`) | leases lost while held |
//! | `lockward_renewals_total` | `store`, `outcome` (`ok`, `error`) | renewals |
//! | `lockward_fence_went_back_total` | `store` | grants refused because their fence was not above one granted before for the name (the store went back) |
//! | `lockward_leader` | `election` | 1 while this process leads, else 0 (gauge) |
//! | `lockward_elections_total` | `election`, `event` (`elected`, `revoked`, `resigned`) | leadership changes of this process |
//! | `lockward_cron_runs_total` | `cron` (the job's name), `outcome` (`ok`, `failed`, `skipped`) | fire times this instance ran or skipped |
//! | `lockward_cron_missed_total` | `cron` | fire times no instance took before a later one was due, as this instance recorded them |
//! | `lockward_semaphore_permits_held` | `semaphore` | permits this process holds now (gauge) |
//! | `lockward_rate_limited_total` | `limiter` | requests refused by a rate limit |
//! | `lockward_idempotent_total` | `outcome` (`ran`, `stored`, `in_progress`) | idempotent calls, by what they did |
//!
//! Lock names are never labels: one per order or user would make a time
//! series each. `store` is the URL's scheme (`redis`, `k8s`, …), never the
//! URL; elections, cron jobs, semaphores and limiters are few, so their
//! names are labels. The cron job's label is `cron`, not `job`, which
//! Prometheus sets to the scrape job's name (and would rename ours to
//! `exported_job`).

use std::time::Duration;

use metrics::{counter, gauge, histogram};

use crate::error::LostReason;

/// How an acquisition ended, as the `outcome` label says it.
pub(crate) fn acquisition(store: &'static str, outcome: &'static str, took: Duration) {
    counter!("lockward_acquisitions_total", "store" => store, "outcome" => outcome).increment(1);
    histogram!("lockward_acquire_seconds", "store" => store).record(took.as_secs_f64());
}

/// Counts a waiting acquisition in `lockward_waiting` while it lives.
pub(crate) struct Waiting(&'static str);

impl Waiting {
    pub(crate) fn start(store: &'static str) -> Waiting {
        gauge!("lockward_waiting", "store" => store).increment(1.0);
        Waiting(store)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        gauge!("lockward_waiting", "store" => self.0).decrement(1.0);
    }
}

/// A lock this process now holds.
pub(crate) fn held(store: &'static str) {
    gauge!("lockward_held", "store" => store).increment(1.0);
}

/// A lock this process held, let go (released, dropped) after `held_for`.
pub(crate) fn let_go(store: &'static str, held_for: Duration) {
    gauge!("lockward_held", "store" => store).decrement(1.0);
    histogram!("lockward_held_seconds", "store" => store).record(held_for.as_secs_f64());
}

/// A lease lost while held.
pub(crate) fn lost(store: &'static str, reason: LostReason) {
    let reason = match reason {
        LostReason::Expired => "expired",
        LostReason::TakenOver => "taken_over",
        LostReason::SessionEnded => "session_ended",
        LostReason::ForcedUnlock => "forced_unlock",
    };
    counter!("lockward_lost_total", "store" => store, "reason" => reason).increment(1);
}

/// One renewal's outcome.
pub(crate) fn renewal(store: &'static str, ok: bool) {
    let outcome = if ok { "ok" } else { "error" };
    counter!("lockward_renewals_total", "store" => store, "outcome" => outcome).increment(1);
}

/// This process starts (`elected`) or stops (`revoked`, `resigned`)
/// leading `election`.
pub(crate) fn election(election: &str, event: &'static str) {
    let leading = if event == "elected" { 1.0 } else { 0.0 };
    gauge!("lockward_leader", "election" => election.to_string()).set(leading);
    counter!("lockward_elections_total", "election" => election.to_string(), "event" => event)
        .increment(1);
}

/// This process no longer leads `election`.
pub(crate) fn not_leading(election: &str) {
    gauge!("lockward_leader", "election" => election.to_string()).set(0.0);
}

/// A fire time of `job` this instance ran (`ok`, `failed`) or skipped.
#[cfg_attr(not(feature = "cron"), allow(dead_code))]
pub(crate) fn cron_run(job: &str, outcome: &'static str) {
    counter!("lockward_cron_runs_total", "cron" => job.to_string(), "outcome" => outcome)
        .increment(1);
}

/// A fire time of `job` this instance recorded as missed.
#[cfg_attr(not(feature = "cron"), allow(dead_code))]
pub(crate) fn cron_missed(job: &str) {
    counter!("lockward_cron_missed_total", "cron" => job.to_string()).increment(1);
}

/// Permits of `semaphore` this process took (positive) or gave back.
pub(crate) fn permits(semaphore: &str, change: f64) {
    gauge!("lockward_semaphore_permits_held", "semaphore" => semaphore.to_string())
        .increment(change);
}

/// A request `limiter` refused.
pub(crate) fn rate_limited(limiter: &str) {
    counter!("lockward_rate_limited_total", "limiter" => limiter.to_string()).increment(1);
}

/// An idempotent call's outcome (`ran`, `stored`, `in_progress`).
pub(crate) fn idempotent(outcome: &'static str) {
    counter!("lockward_idempotent_total", "outcome" => outcome).increment(1);
}

/// A grant given back because its fence was not above one granted before.
pub(crate) fn fence_went_back(store: &'static str) {
    counter!("lockward_fence_went_back_total", "store" => store).increment(1);
}
