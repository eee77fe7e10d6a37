//! One fire time taken by this instance: its locks, its lost signal, the
//! request of a later fire time to stop, and recording how it ended.

use chrono::Utc;

use super::{overlap, CronJob, Execution, Outcome, Overlap};
use crate::error::{Error, Result};
use crate::guard::{Guard, LostSignal};
use crate::name::Name;

/// What [`CronJob::take_turn`] found.
#[derive(Debug)]
pub enum Turn {
    /// This instance runs the fire time.
    Run(Box<Claim>),
    /// Another instance runs or ran it.
    Taken,
    /// Skipped (and written to the ledger): the job still runs on
    /// `running` and the policy is [`Overlap::Forbid`].
    Skipped {
        /// The instance still running the job, or "another instance".
        running: String,
    },
}

/// This instance runs one fire time.
#[derive(Debug)]
pub struct Claim {
    /// When `lock_at_most_for` ends, whatever the locks' TTL.
    until: std::time::Instant,
    guard: Guard,
    /// The job's running lock, unless the policy is [`Overlap::Allow`].
    running: Option<Guard>,
    key: Name,
    execution: Execution,
    job: CronJob,
}

impl Claim {
    /// The claim of `execution`, taken now with its locks.
    pub(super) fn new(
        job: CronJob,
        guard: Guard,
        running: Option<Guard>,
        key: Name,
        execution: Execution,
    ) -> Claim {
        Claim {
            until: std::time::Instant::now() + job.options.lock_at_most_for,
            guard,
            running,
            key,
            execution,
            job,
        }
    }

    /// The lock of this fire time (its fence fences the job's writes). Its
    /// `lost()` fires at `lock_at_most_for`, except on a store whose locks
    /// are renewed for it (see [`Claim::lost_signal`], which always does).
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The fencing token of this execution.
    pub fn fence(&self) -> u64 {
        self.execution.fence
    }

    /// One signal over this execution's locks (the fire time's and the
    /// job's running lock): it fires when either is lost, at
    /// `lock_at_most_for` at the latest.
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal::of_all(std::iter::once(&self.guard).chain(&self.running)).until(self.until)
    }

    /// With [`Overlap::Replace`], resolves when a later fire time asks this
    /// execution to stop (the job should then end, and [`Claim::finish`]
    /// let the next one start); never resolves otherwise. Looks every
    /// [`overlap::REPLACE_POLL`].
    ///
    /// Cancellation: cancel-safe; it only reads.
    pub async fn replaced(&self) {
        match &self.running {
            Some(running) if self.job.options.overlap == Overlap::Replace => {
                overlap::replaced(&self.job, running).await
            }
            _ => std::future::pending().await,
        }
    }

    /// Records the end and outcome, lets the job run again (releases its
    /// running lock), keeps the fire time's lock until `lock_at_least_for`
    /// after the start, then releases it.
    ///
    /// Cancellation: dropping the future releases the locks not yet
    /// released in the background; the outcome may be unrecorded.
    pub async fn finish(mut self, outcome: Outcome) -> Result<()> {
        let counted = match outcome {
            Outcome::Succeeded => "ok",
            Outcome::Skipped(_) | Outcome::Missed(_) => "skipped",
            Outcome::Failed(_) | Outcome::Running => "failed",
        };
        crate::metrics::cron_run(&self.job.job, counted);
        tracing::info!(cron = %self.job.job, slot = %self.key, fence = self.guard.fence(),
            outcome = counted, "fire time done");
        self.execution.end = Some(Utc::now());
        self.execution.outcome = outcome;
        self.job
            .store
            .put_record(
                self.key.as_str(),
                &self.execution.encode(),
                self.job.options.retention,
            )
            .await?;
        if let Some(running) = self.running.take() {
            match running.release().await {
                Ok(()) | Err(Error::Lost { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let held = (Utc::now() - self.execution.start)
            .to_std()
            .unwrap_or_default();
        if let Some(left) = self.job.options.lock_at_least_for.checked_sub(held) {
            tokio::time::sleep(left).await;
        }
        match self.guard.release().await {
            Ok(()) | Err(Error::Lost { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
