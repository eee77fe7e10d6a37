//! The overlap policy of a cron job: what happens when a fire time comes
//! while the job still runs (as Kubernetes CronJob's `concurrencyPolicy`).
//!
//! Under [`Overlap::Forbid`] and [`Overlap::Replace`] an execution holds,
//! beside its fire time's lock, the job's running lock `cron/JOB/running`
//! for as long as it runs (at most `lock_at_most_for`, like the fire time's
//! lock). Forbid: a fire time that finds it held is skipped, and the skip
//! is written to the ledger with the running instance. Replace: the new
//! execution writes a stop request naming the running execution's lock
//! (record `cron-replace/JOB`), which the running one reads
//! ([`Claim::replaced`](super::Claim::replaced)), and waits for the running
//! lock, so it starts only once the old execution has ended and let go.

use std::str::FromStr;
use std::time::Duration;

use super::CronJob;
use crate::error::{Error, Result};
use crate::guard::Guard;

/// What happens when a fire time comes while the job still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Skip the new fire time and write the skip to the ledger (default).
    #[default]
    Forbid,
    /// Run both at once (every fire time runs once, whatever else runs).
    Allow,
    /// Ask the running execution to stop, then run the new one.
    Replace,
}

impl Overlap {
    /// `forbid`, `allow` or `replace`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Forbid => "forbid",
            Overlap::Allow => "allow",
            Overlap::Replace => "replace",
        }
    }
}

impl FromStr for Overlap {
    type Err = Error;

    fn from_str(text: &str) -> Result<Overlap> {
        match text {
            "forbid" => Ok(Overlap::Forbid),
            "allow" => Ok(Overlap::Allow),
            "replace" => Ok(Overlap::Replace),
            other => Err(Error::invalid(
                "overlap",
                format!("{other:?} is not one of forbid, allow, replace"),
            )),
        }
    }
}

/// How often a running execution under [`Overlap::Replace`] looks for a
/// stop request.
pub const REPLACE_POLL: Duration = Duration::from_millis(250);

/// Whether this fire time may run, as the policy says.
pub(super) enum Running {
    /// It may: the job's running lock, held (none under `Allow`).
    Taken(Option<Guard>),
    /// The job runs elsewhere (the holder's label, where the store keeps
    /// one) and the policy forbids a second execution.
    Elsewhere(Option<String>),
}

/// Takes the job's running lock as the policy says, for the fire time
/// whose lock is `slot`; under `Replace` it asks the running execution to
/// stop and waits, at most until `slot`'s deadline.
pub(super) async fn take_running(job: &CronJob, slot: &Guard) -> Result<Running> {
    if job.options.overlap == Overlap::Allow {
        return Ok(Running::Taken(None));
    }
    let name = running_lock(job);
    let opts = job.lock_options();
    match job.store.try_acquire(&name, &opts).await {
        Ok(guard) => return Ok(Running::Taken(Some(guard))),
        Err(Error::Busy { .. }) => {}
        Err(e) => return Err(e),
    }
    let holder = job.store.inspect(&name).await?;
    if job.options.overlap == Overlap::Forbid {
        return Ok(Running::Elsewhere(holder.and_then(|h| h.label)));
    }
    if let Some(holder) = holder {
        let target = match holder.fence {
            Some(fence) => format!("fence:{fence}"),
            None => format!("owner:{}", holder.owner),
        };
        job.store
            .put_record(&request_key(job), &target, job.options.lock_at_most_for)
            .await?;
    }
    let guard = job
        .store
        .acquire(&name, &opts.wait(slot.lease().remaining()))
        .await?;
    Ok(Running::Taken(Some(guard)))
}

/// Resolves once a stop request names the execution holding `running`.
pub(super) async fn replaced(job: &CronJob, running: &Guard) {
    let lease = running.lease();
    let mine = [
        format!("fence:{}", lease.fence),
        format!("owner:{}", lease.owner),
    ];
    loop {
        if let Ok(Some(request)) = job.store.record(&request_key(job)).await {
            if mine.contains(&request) {
                return;
            }
        }
        tokio::time::sleep(REPLACE_POLL).await;
    }
}

/// The lock an execution holds while it runs, under Forbid and Replace.
fn running_lock(job: &CronJob) -> String {
    format!("cron/{}/running", job.job)
}

/// The record a replacing execution writes to stop the running one.
fn request_key(job: &CronJob) -> String {
    format!("cron-replace/{}", job.job)
}
