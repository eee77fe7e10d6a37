//! Distributed cron: a job, a cron expression (with an optional seconds
//! field) and a time zone; at most one execution per (job, scheduled fire
//! time) across every instance that runs the same job.
//!
//! For each fire time, an instance takes the lock `cron/<job>/<fire time>`
//! (so an instance whose clock is a little late finds the slot taken rather
//! than running it again), then claims the ledger record of that fire time,
//! which only one instance can insert: the record, not the lock, makes the
//! execution happen at most once, even for an instance that comes after the
//! lock was released. As in ShedLock, the lock is held at most
//! `lock_at_most_for` (a hung job cannot block later fire times forever)
//! and at least `lock_at_least_for`.
//!
//! A job never runs twice at the same time unless asked to: with the
//! default [`Overlap::Forbid`] a fire time whose job is still running
//! elsewhere is skipped (and the skip is written to the ledger), with
//! [`Overlap::Replace`] the running execution is told to stop and the new
//! one starts once it has, and [`Overlap::Allow`] runs them side by side
//! (see [`overlap`]).
//!
//! The ledger (fire time, instance, start, end, outcome) lives in the store
//! for `retention`; [`CronJob::ledger`] also reports the fire times nobody
//! ran.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use lockward::recipe::cron::{CronJob, CronOptions, Outcome};
//! let store = lockward::Store::memory();
//! let job = CronJob::new(store, "cleanup", "0 0 2 * * *", "Europe/Berlin", "node-a", CronOptions::default())?;
//! let fire = job.next_fire_after(chrono::Utc::now())?;
//! if let Some(claim) = job.claim(fire).await? {
//!     // clean up, fencing writes with claim.fence()
//!     claim.finish(Outcome::Succeeded).await?;
//! }
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;

use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::name::Name;
use crate::options::{LockOptions, Renewal};
use crate::store::Store;

mod claim;
mod ledger;
pub mod overlap;

pub use claim::{Claim, Turn};
pub use ledger::{Entry, Execution, Outcome};
pub use overlap::Overlap;

/// Lock and ledger settings of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CronOptions {
    /// Keep the lock at least this long after the start (default 0).
    pub lock_at_least_for: Duration,
    /// Never hold it longer (default 10 min); the job is told it lost the
    /// lock then.
    pub lock_at_most_for: Duration,
    /// How long the ledger keeps an execution (default 7 days).
    pub retention: Duration,
    /// What happens when a fire time comes while the job still runs
    /// (default [`Overlap::Forbid`]).
    pub overlap: Overlap,
}

impl Default for CronOptions {
    fn default() -> Self {
        CronOptions {
            lock_at_least_for: Duration::ZERO,
            lock_at_most_for: Duration::from_secs(600),
            retention: Duration::from_secs(7 * 24 * 3600),
            overlap: Overlap::Forbid,
        }
    }
}

/// A job scheduled by a cron expression in a time zone.
#[derive(Debug, Clone)]
pub struct CronJob {
    store: Store,
    job: String,
    schedule: Cron,
    zone: Tz,
    instance: String,
    options: CronOptions,
}

impl CronJob {
    /// Checks the expression (5 or 6 fields; the 6th, leading, is seconds)
    /// and the IANA time zone.
    pub fn new(
        store: Store,
        job: &str,
        expression: &str,
        zone: &str,
        instance: &str,
        options: CronOptions,
    ) -> Result<Self> {
        Name::new(format!("cron/{job}/0000000000000"))?;
        let schedule = Cron::from_str(expression)
            .map_err(|e| Error::invalid("cron expression", format!("{expression:?}: {e}")))?;
        let zone: Tz = zone.parse().map_err(|_| {
            Error::invalid(
                "time zone",
                format!("{zone:?} is not an IANA time zone name"),
            )
        })?;
        crate::duration::check_ttl(options.lock_at_most_for)?;
        crate::duration::check_retention(options.retention)?;
        if options.lock_at_least_for > options.lock_at_most_for {
            return Err(Error::invalid(
                "lock_at_least_for",
                "it cannot be longer than lock_at_most_for",
            ));
        }
        Ok(CronJob {
            store,
            job: job.to_string(),
            schedule,
            zone,
            instance: instance.to_string(),
            options,
        })
    }

    /// Records this job's expression and time zone in the store, so that
    /// [`CronJob::recorded`] can rebuild it (for `cron-log`).
    ///
    /// Cancellation: the record may or may not have been written; writing it
    /// again is harmless.
    pub async fn record_schedule(&self) -> Result<()> {
        let key = format!("cron-schedule/{}", self.job);
        let value = format!("{}\t{}", self.schedule.as_str(), self.zone.name());
        self.store
            .put_record(&key, &value, self.options.retention)
            .await
    }

    /// The job as its instances last recorded it, if any did.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn recorded(store: Store, job: &str, instance: &str) -> Result<Option<CronJob>> {
        let key = format!("cron-schedule/{job}");
        let Some(value) = store.record(&key).await? else {
            return Ok(None);
        };
        let (expression, zone) = value.split_once('\t').unwrap_or((value.as_str(), "UTC"));
        CronJob::new(
            store,
            job,
            expression,
            zone,
            instance,
            CronOptions::default(),
        )
        .map(Some)
    }

    /// Every job whose instances recorded a schedule (within its
    /// retention), sorted by name: for status views.
    ///
    /// Cancellation: dropping the future changes nothing.
    pub async fn all_recorded(store: Store, instance: &str) -> Result<Vec<CronJob>> {
        let mut jobs = Vec::new();
        for (key, _) in store.records("cron-schedule/").await? {
            let Some(job) = key.strip_prefix("cron-schedule/") else {
                continue;
            };
            // A schedule recorded since the listing was read comes back too;
            // one that no longer parses is left out rather than failing all.
            if let Ok(Some(job)) = CronJob::recorded(store.clone(), job, instance).await {
                jobs.push(job);
            }
        }
        Ok(jobs)
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.job
    }

    /// The cron expression, as given.
    pub fn expression(&self) -> &str {
        self.schedule.as_str()
    }

    /// The IANA time zone its fire times are computed in.
    pub fn zone(&self) -> &str {
        self.zone.name()
    }

    /// The first fire time strictly after `after`.
    pub fn next_fire_after(&self, after: DateTime<Utc>) -> Result<DateTime<Utc>> {
        self.schedule
            .find_next_occurrence(&after.with_timezone(&self.zone), false)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| Error::invalid("cron expression", format!("no next fire time: {e}")))
    }

    fn slot(&self, fire: DateTime<Utc>) -> String {
        format!("cron/{}/{:013}", self.job, fire.timestamp_millis())
    }

    /// Claims fire time `fire` for this instance: `None` when another
    /// instance runs or ran it, or when it was skipped because the job
    /// still runs (see [`CronJob::take_turn`], which says which). Call
    /// [`Claim::finish`] when the job ends.
    ///
    /// Cancellation: not cancel-safe; a claim dropped half made leaves its
    /// lock to expire at `lock_at_most_for` and may leave its fire time
    /// marked as running.
    pub async fn claim(&self, fire: DateTime<Utc>) -> Result<Option<Claim>> {
        Ok(match self.take_turn(fire).await? {
            Turn::Run(claim) => Some(*claim),
            Turn::Taken | Turn::Skipped { .. } => None,
        })
    }

    /// Takes fire time `fire` for this instance if it is this instance's to
    /// run, as the overlap policy says. With [`Overlap::Replace`] this
    /// waits (at most `lock_at_most_for`) for the running execution to
    /// stop.
    ///
    /// Cancellation: as for [`CronJob::claim`].
    #[tracing::instrument(level = "debug", skip_all, fields(cron = %self.job, %fire))]
    pub async fn take_turn(&self, fire: DateTime<Utc>) -> Result<Turn> {
        let slot = self.slot(fire);
        let opts = self.lock_options();
        let guard = match self.store.try_acquire(&slot, &opts).await {
            Ok(g) => g,
            Err(Error::Busy { .. }) => return Ok(Turn::Taken),
            Err(e) => return Err(e),
        };
        let key = Name::new(slot)?;
        let running = match overlap::take_running(self, &guard).await {
            Ok(overlap::Running::Taken(running)) => running,
            Ok(overlap::Running::Elsewhere(holder)) => {
                let instance = holder.unwrap_or_else(|| "another instance".into());
                let skipped = self.execution(
                    &guard,
                    Outcome::Skipped(format!("still running on {instance}")),
                );
                let recorded = self
                    .store
                    .insert_record(key.as_str(), &skipped.encode(), self.options.retention)
                    .await;
                let _ = guard.release().await;
                return Ok(match recorded? {
                    true => {
                        crate::metrics::cron_run(&self.job, "skipped");
                        Turn::Skipped { running: instance }
                    }
                    false => Turn::Taken,
                });
            }
            Err(e) => {
                let _ = guard.release().await;
                return Err(e);
            }
        };
        let execution = self.execution(&guard, Outcome::Running);
        if !self
            .store
            .insert_record(key.as_str(), &execution.encode(), self.options.retention)
            .await?
        {
            // Ran already (the lock was released after it).
            if let Some(r) = running {
                let _ = r.release().await;
            }
            let _ = guard.release().await;
            return Ok(Turn::Taken);
        }
        Ok(Turn::Run(Box::new(Claim::new(
            self.clone(),
            guard,
            running,
            key,
            execution,
        ))))
    }

    /// Records fire time `fire` as missed, unless an instance ran, runs or
    /// skipped it: for a fire time found past when a later one is already
    /// due, so that it is neither run late nor left unexplained. `true`
    /// when this call recorded it (once across instances), counted in
    /// `lockward_cron_missed_total`.
    ///
    /// Cancellation: a cancelled call may or may not have recorded it; its
    /// fire time's lock then frees at `lock_at_most_for`.
    #[tracing::instrument(level = "debug", skip_all, fields(cron = %self.job, %fire))]
    pub async fn record_missed(&self, fire: DateTime<Utc>, why: &str) -> Result<bool> {
        let slot = self.slot(fire);
        let guard = match self.store.try_acquire(&slot, &self.lock_options()).await {
            Ok(g) => g,
            Err(Error::Busy { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        let missed = Execution {
            end: Some(Utc::now()),
            ..self.execution(&guard, Outcome::Missed(why.to_string()))
        };
        let recorded = self
            .store
            .insert_record(&slot, &missed.encode(), self.options.retention)
            .await;
        let _ = guard.release().await;
        if recorded? {
            crate::metrics::cron_missed(&self.job);
            tracing::warn!(cron = %self.job, %fire, why, "fire time missed");
            return Ok(true);
        }
        Ok(false)
    }

    /// The lock options of a fire time's lock and of the job's running
    /// lock: held at most `lock_at_most_for`, never renewed.
    ///
    /// On a store whose locks cannot live as long (ZooKeeper: a lock
    /// outlives no session), the locks are held for the longest TTL it
    /// allows and renewed, and the claim's lost signal keeps
    /// `lock_at_most_for`: a dead instance's locks free at that TTL, a live
    /// one is told to stop at `lock_at_most_for` all the same.
    fn lock_options(&self) -> LockOptions {
        let at_most = self.options.lock_at_most_for;
        let (ttl, renewal) = match self.store.max_ttl() {
            Some(max) if max < at_most => (max, Renewal::Auto),
            _ => (at_most, Renewal::Off),
        };
        LockOptions::new()
            .ttl(ttl)
            .renewal(renewal)
            .label(self.instance.clone())
    }

    fn execution(&self, guard: &Guard, outcome: Outcome) -> Execution {
        let now = Utc::now();
        Execution {
            instance: self.instance.clone(),
            start: now,
            end: matches!(outcome, Outcome::Skipped(_)).then_some(now),
            outcome,
            fence: guard.fence(),
        }
    }
}
