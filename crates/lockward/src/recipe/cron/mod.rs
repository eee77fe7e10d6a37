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

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

use crate::error::{Error, Result};
use crate::guard::{Guard, LostSignal};
use crate::name::Name;
use crate::options::{LockOptions, Renewal};
use crate::store::Store;

pub mod overlap;

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

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Still running (or its instance died before recording the end).
    Running,
    /// The job succeeded.
    Succeeded,
    /// The job failed; why.
    Failed(String),
    /// Not run: the job was still running (on the instance named, where
    /// known) and the overlap policy forbids a second execution.
    Skipped(String),
    /// Not run: no instance took it before a later fire time was due (all
    /// were busy, paused or down); why, as the instance that noticed saw it.
    Missed(String),
}

impl std::fmt::Display for Outcome {
    /// `running`, `succeeded`, `failed: WHY` or `skipped: WHY`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Running => f.write_str("running"),
            Outcome::Succeeded => f.write_str("succeeded"),
            Outcome::Failed(why) => write!(f, "failed: {why}"),
            Outcome::Skipped(why) => write!(f, "skipped: {why}"),
            Outcome::Missed(why) => write!(f, "missed: {why}"),
        }
    }
}

/// One line of the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The scheduled fire time.
    pub fire_time: DateTime<Utc>,
    /// The execution, or `None` when no instance ran this fire time.
    pub execution: Option<Execution>,
}

/// Who ran a fire time, when, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    /// The instance that ran it.
    pub instance: String,
    /// When it started.
    pub start: DateTime<Utc>,
    /// When it ended, once it has.
    pub end: Option<DateTime<Utc>>,
    /// How it ended.
    pub outcome: Outcome,
    /// The fencing token of its lock.
    pub fence: u64,
}

impl Execution {
    fn encode(&self) -> String {
        let outcome = match &self.outcome {
            Outcome::Running => "running".to_string(),
            Outcome::Succeeded => "succeeded".to_string(),
            Outcome::Failed(why) => format!("failed:{}", why.replace(['\t', '\n'], " ")),
            Outcome::Skipped(why) => format!("skipped:{}", why.replace(['\t', '\n'], " ")),
            Outcome::Missed(why) => format!("missed:{}", why.replace(['\t', '\n'], " ")),
        };
        let end = self
            .end
            .map_or(String::new(), |e| e.timestamp_millis().to_string());
        format!(
            "{}\t{}\t{end}\t{outcome}\t{}",
            self.instance.replace('\t', " "),
            self.start.timestamp_millis(),
            self.fence
        )
    }

    fn decode(text: &str) -> Option<Execution> {
        let mut f = text.splitn(5, '\t');
        let instance = f.next()?.to_string();
        let start = Utc.timestamp_millis_opt(f.next()?.parse().ok()?).single()?;
        let end = match f.next()? {
            "" => None,
            ms => Some(Utc.timestamp_millis_opt(ms.parse().ok()?).single()?),
        };
        let outcome = match f.next()? {
            "running" => Outcome::Running,
            "succeeded" => Outcome::Succeeded,
            other if other.starts_with("skipped:") => {
                Outcome::Skipped(other["skipped:".len()..].to_string())
            }
            other if other.starts_with("missed:") => {
                Outcome::Missed(other["missed:".len()..].to_string())
            }
            other => Outcome::Failed(other.strip_prefix("failed:").unwrap_or(other).to_string()),
        };
        let fence = f.next()?.parse().ok()?;
        Some(Execution {
            instance,
            start,
            end,
            outcome,
            fence,
        })
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
    pub async fn record_schedule(&self) -> Result<()> {
        let key = format!("cron-schedule/{}", self.job);
        let value = format!("{}\t{}", self.schedule.as_str(), self.zone.name());
        self.store
            .put_record(&key, &value, self.options.retention)
            .await
    }

    /// The job as its instances last recorded it, if any did.
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
    /// Cancelling the call changes nothing.
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

    /// The latest fire time at or before `at`, with its execution, or with
    /// `None` when nobody ran it (one read, whatever the ledger's length).
    /// `None` when the schedule has no fire time before `at`.
    ///
    /// Cancelling the call changes nothing.
    pub async fn fire_time_before(&self, at: DateTime<Utc>) -> Result<Option<Entry>> {
        let Ok(fire) = self
            .schedule
            .find_previous_occurrence(&at.with_timezone(&self.zone), true)
        else {
            return Ok(None);
        };
        let fire = fire.with_timezone(&Utc);
        let recorded = self.store.record(&self.slot(fire)).await?;
        Ok(Some(Entry {
            fire_time: fire,
            execution: recorded.as_deref().and_then(Execution::decode),
        }))
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
        Ok(Turn::Run(Box::new(Claim {
            until: std::time::Instant::now() + self.options.lock_at_most_for,
            guard,
            running,
            key,
            execution,
            job: self.clone(),
        })))
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

    /// The ledger from `since` to `until`: every fire time in between, with
    /// its execution or `None` when nobody ran it.
    pub async fn ledger(&self, since: DateTime<Utc>, until: DateTime<Utc>) -> Result<Vec<Entry>> {
        let prefix = format!("cron/{}/", self.job);
        let mut executions: std::collections::BTreeMap<i64, Execution> = Default::default();
        for (key, value) in self.store.records(&prefix).await? {
            let (Some(ms), Some(e)) = (
                key.strip_prefix(&prefix)
                    .and_then(|t| t.parse::<i64>().ok()),
                Execution::decode(&value),
            ) else {
                continue;
            };
            executions.insert(ms, e);
        }
        let mut entries = Vec::new();
        let mut at = since - chrono::Duration::milliseconds(1);
        loop {
            let fire = self.next_fire_after(at)?;
            if fire >= until {
                break;
            }
            entries.push(Entry {
                fire_time: fire,
                execution: executions.remove(&fire.timestamp_millis()),
            });
            at = fire;
            if entries.len() > 100_000 {
                break;
            }
        }
        Ok(entries)
    }

    /// Fire times with an execution, oldest first (to start a ledger view).
    pub async fn first_recorded(&self) -> Result<Option<DateTime<Utc>>> {
        let prefix = format!("cron/{}/", self.job);
        Ok(self
            .store
            .records(&prefix)
            .await?
            .iter()
            .filter_map(|(k, _)| k.strip_prefix(&prefix)?.parse::<i64>().ok())
            .min()
            .and_then(|ms| Utc.timestamp_millis_opt(ms).single()))
    }
}

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
    /// Cancel-safe: it only reads.
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
