//! Redlock's records: written on every master, read from a majority.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{RedlockBackend, NODE_TIMEOUT};
use crate::backend::redis::keys;
use crate::backend::time::ttl_millis;
use crate::backend::{Attempt, RecordBackend, Request, Versioned};
use crate::duration::drift;
use crate::error::{Error, Result};
use crate::name::Name;
use crate::owner::OwnerId;

#[async_trait]
impl RecordBackend for RedlockBackend {
    /// A record counts when a majority stored it.
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool> {
        Ok(self.set_record(key, value, ttl, true).await? >= self.quorum)
    }

    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()> {
        self.set_record(key, value, ttl, false).await.map(|_| ())
    }

    /// The value most masters hold, read with one `GET` on each; an error
    /// when fewer than a majority answered.
    async fn record(&self, key: &Name) -> Result<Option<String>> {
        let k = keys::record_key(&self.prefix, key, false);
        let replies = self
            .on_all(NODE_TIMEOUT, |conn| {
                let mut cmd = redis::cmd("GET");
                cmd.arg(&k);
                async move { cmd.query_async::<Option<String>>(&mut conn.clone()).await }
            })
            .await;
        let failed = self.failures(&replies);
        if failed.len() > self.masters.len() - self.quorum {
            return Err(self.no_quorum(&failed));
        }
        Ok(most_held(
            replies
                .into_iter()
                .filter_map(|r| r.ok().flatten())
                .collect(),
        ))
    }

    /// Each record's value as a majority of masters holds it (else the
    /// value most masters hold).
    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let pattern = keys::scan_pattern(&self.prefix, prefix, false);
        let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for m in &self.masters {
            let Ok(found) = crate::backend::redis::conn::scan_all(&m.conn, &pattern).await else {
                continue;
            };
            for key in found {
                let Some(record) = key
                    .strip_prefix(self.prefix.as_str())
                    .and_then(|k| keys::record_of(k, false))
                else {
                    continue;
                };
                let value: Option<String> = redis::cmd("GET")
                    .arg(&key)
                    .query_async(&mut m.conn.clone())
                    .await
                    .unwrap_or(None);
                if let Some(value) = value {
                    seen.entry(record).or_default().push(value);
                }
            }
        }
        Ok(seen
            .into_iter()
            .filter_map(|(record, values)| Some((record, most_held(values)?)))
            .collect())
    }

    /// The highest version among a majority of answers: every accepted
    /// write is on a majority and carries a larger version than the ones
    /// before it, so any majority includes the latest.
    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>> {
        let k = keys::versioned_key(&self.prefix, key, false);
        let replies = self
            .on_all(NODE_TIMEOUT, |conn| {
                let mut cmd = redis::cmd("HMGET");
                cmd.arg(&k).arg("v").arg("d");
                async move {
                    cmd.query_async::<(Option<u64>, Option<String>)>(&mut conn.clone())
                        .await
                }
            })
            .await;
        let failed = self.failures(&replies);
        if failed.len() > self.masters.len() - self.quorum {
            return Err(self.no_quorum(&failed));
        }
        Ok(replies
            .into_iter()
            .filter_map(|r| r.ok())
            .filter_map(|(v, d)| {
                Some(Versioned {
                    version: v?,
                    value: d?,
                })
            })
            .max_by_key(|r| r.version))
    }

    /// Independent masters cannot agree on a compare-and-set by
    /// themselves, so writers take turns: a write takes the record's write
    /// lock (a Redlock lock in a key space of its own, see
    /// [`keys::write_lock_keys`]), reads a majority, and writes everywhere
    /// with the lock's fence as the new version; a master refuses a version
    /// below its own, so a writer that lost the lock while paused is
    /// refused. A write that reached fewer than a majority has an unknown
    /// outcome and is an error; a busy write lock is a conflict.
    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let lock_ttl = Duration::from_secs(2);
        let owner = OwnerId::random();
        let started = Instant::now();
        let req = Request {
            name: key,
            owner,
            ttl: lock_ttl,
            label: None,
            kind: crate::backend::Kind::Mutex,
        };
        let lock = keys::write_lock_keys(&self.prefix, key);
        let fence = match self.try_acquire_keys(lock.clone(), &req, None).await? {
            Attempt::Granted { fence } => fence,
            Attempt::Held { .. } => return Ok(None),
        };
        let outcome = self
            .write_under_lock(
                key,
                expected,
                value,
                ttl,
                fence,
                started + lock_ttl - drift(lock_ttl),
            )
            .await;
        let _ = self
            .release_everywhere(&lock, &owner.to_string(), NODE_TIMEOUT)
            .await;
        outcome
    }
}

impl RedlockBackend {
    /// The read-compare-write of [`RecordBackend::write_versioned`], made while
    /// holding the record's write lock with `fence` until `valid_until`.
    async fn write_under_lock(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
        fence: u64,
        valid_until: Instant,
    ) -> Result<Option<u64>> {
        let current = self.read_versioned(key).await?.map_or(0, |v| v.version);
        if current != expected {
            return Ok(None);
        }
        if Instant::now() >= valid_until || fence <= current {
            return Ok(None);
        }
        let k = keys::versioned_key(&self.prefix, key, false);
        let replies = self
            .on_all(NODE_TIMEOUT, |conn| {
                let mut call = self.write_versioned.key(&k);
                call.arg(fence).arg(value).arg(ttl_millis(ttl));
                async move { call.invoke_async::<i64>(&mut conn.clone()).await }
            })
            .await;
        let accepted = replies.iter().filter(|r| matches!(r, Ok(1))).count();
        if accepted >= self.quorum {
            return Ok(Some(fence));
        }
        Err(Error::Unavailable {
            address: self.address.clone(),
            message: format!(
                "a versioned write of {key} reached {accepted} of {} masters, short of a \
                 majority; its outcome is unknown: {}",
                self.masters.len(),
                self.failures(&replies).join("; ")
            ),
            cause: None,
        })
    }
}

/// The value that occurs most often in `values` (the smallest on a tie).
fn most_held(mut values: Vec<String>) -> Option<String> {
    values.sort();
    let mut best: Option<&[String]> = None;
    for run in values.chunk_by(|a, b| a == b) {
        if best.is_none_or(|b| run.len() > b.len()) {
            best = Some(run);
        }
    }
    best.map(|run| run[0].clone())
}
