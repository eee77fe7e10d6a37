//! The ledger of a job: what happened to each fire time (who ran it,
//! when, how it ended), one record per fire time, and the reads of it.

use chrono::{DateTime, TimeZone, Utc};

use super::CronJob;
use crate::error::Result;

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
    pub(super) fn encode(&self) -> String {
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

    pub(super) fn decode(text: &str) -> Option<Execution> {
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

impl CronJob {
    /// The latest fire time at or before `at`, with its execution, or with
    /// `None` when nobody ran it (one read, whatever the ledger's length).
    /// `None` when the schedule has no fire time before `at`.
    ///
    /// Cancellation: dropping the future changes nothing.
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

    /// The ledger from `since` to `until`: every fire time in between, with
    /// its execution or `None` when nobody ran it.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
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
    ///
    /// Cancellation: a read; dropping the future changes nothing.
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
