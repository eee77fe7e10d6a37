//! The two rounds of a Redlock grant (take the lock and read each master's
//! fence; raise the fence where this owner holds), each counted against the
//! quorum within the lease's validity (see the module docs for why the
//! fences stay monotonic), and the release everywhere that undoes a
//! failed round.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::Value;

use super::mutex::{node_timeout, Abandoned, RedlockBackend, Vote};
use crate::backend::redis::codec::{int, text};
use crate::backend::redis::keys;
use crate::backend::time::ttl_millis;
use crate::backend::{Attempt, Request};
use crate::duration::drift;
use crate::error::Result;

impl RedlockBackend {
    /// One grant attempt (both rounds) on the keys `k`: a user's lock, or
    /// a versioned record's write lock. `place` (a lease and the waiter's
    /// ticket) joins the line on every master, or renews the place.
    pub(super) async fn try_acquire_keys(
        &self,
        k: keys::Keys,
        req: &Request<'_>,
        place: Option<(Duration, u64)>,
    ) -> Result<Attempt> {
        let started = Instant::now();
        let limit = req.ttl.saturating_sub(drift(req.ttl));
        let timeout = node_timeout(req.ttl);
        let owner = req.owner.to_string();
        let ttl_ms = ttl_millis(req.ttl);
        let (place_ms, ticket) =
            place.map_or((0, 0), |(lease, ticket)| (ttl_millis(lease), ticket));
        // Dropped before it returns (a cancelled wait), this attempt must not
        // leave its keys on the masters until their TTL.
        let mut abandoned = Abandoned {
            conns: self.masters.iter().map(|m| m.conn.clone()).collect(),
            release: self.release.clone(),
            keys: k.clone(),
            owner: owner.clone(),
            armed: true,
        };

        // Round one: take the lock and read each master's fence.
        let replies = self
            .on_all(timeout, |conn| {
                let (script, k, owner, label) = (&self.grant, &k, &owner, req.label.unwrap_or(""));
                async move {
                    let mut call = script.key(&k.lock);
                    call.key(&k.fence)
                        .key(&k.holder)
                        .key(&k.queue)
                        .key(&k.places)
                        .key(&k.channel)
                        .arg(owner)
                        .arg(ttl_ms)
                        .arg(label)
                        .arg(place_ms)
                        .arg(ticket);
                    call.invoke_async::<Vec<Value>>(&mut conn.clone()).await
                }
            })
            .await;
        let mut granted = Vec::new();
        let mut held = Vec::new();
        let mut failed = Vec::new();
        for (i, reply) in replies.into_iter().enumerate() {
            match self.vote(reply, &k.lock) {
                Ok(Vote::Granted(reading)) => granted.push((i, reading)),
                Ok(Vote::Held(pttl)) => held.push(pttl),
                Ok(Vote::Failed(e)) => failed.push(e),
                Err(e) => {
                    self.release_everywhere(&k, &owner, timeout).await;
                    return Err(e);
                }
            }
        }

        if granted.len() >= self.quorum && started.elapsed() < limit {
            // Round two: raise the counters to the token where we hold.
            let token = granted.iter().map(|(_, r)| *r).max().unwrap_or(0) + 1;
            let token_text = token.to_string();
            let raises = join_all(granted.iter().map(|(i, _)| {
                let master = &self.masters[*i];
                let (script, k, owner, token) = (&self.raise, &k, &owner, &token_text);
                async move {
                    let mut call = script.key(&k.lock);
                    call.key(&k.fence)
                        .key(&k.queue)
                        .key(&k.places)
                        .arg(owner)
                        .arg(token);
                    tokio::time::timeout(
                        timeout,
                        call.invoke_async::<i64>(&mut master.conn.clone()),
                    )
                    .await
                    .ok()
                    .and_then(|r| r.ok())
                }
            }))
            .await;
            let accepted = raises.iter().filter(|r| **r == Some(1)).count();
            if accepted >= self.quorum && started.elapsed() < limit {
                abandoned.armed = false;
                return Ok(Attempt::Granted { fence: token });
            }
        }

        // Not granted: undo what we took, everywhere (a timed-out SET may
        // still have landed).
        self.release_everywhere(&k, &owner, timeout).await;
        abandoned.armed = false;
        if failed.len() > self.masters.len() - self.quorum {
            return Err(self.no_quorum(&failed));
        }
        // The lock frees up when enough holders' keys expire to leave a
        // majority; with a split vote, retry soon with jitter.
        let needed = self
            .quorum
            .saturating_sub(self.masters.len() - held.len() - failed.len());
        let mut pttls: Vec<Duration> = held.iter().flatten().copied().collect();
        pttls.sort();
        let expires_in = match needed {
            0 => Some(Duration::from_millis(fastrand::u64(1..10))),
            n => pttls.get(n - 1).copied(),
        };
        Ok(Attempt::Held { expires_in })
    }

    /// Releases on every master (owner-checked, so harmless where we do
    /// not hold it); returns how many released and the failures.
    pub(super) async fn release_everywhere(
        &self,
        k: &keys::Keys,
        owner: &str,
        timeout: Duration,
    ) -> (usize, Vec<String>) {
        let results = self
            .on_all(timeout, |conn| {
                let script = &self.release;
                async move {
                    let mut call = script.key(&k.lock);
                    call.key(&k.channel)
                        .key(&k.holder)
                        .key(&k.queue)
                        .key(&k.places)
                        .arg(owner);
                    call.invoke_async::<i64>(&mut conn.clone()).await
                }
            })
            .await;
        let released = results.iter().filter(|r| matches!(r, Ok(1))).count();
        (released, self.failures(&results))
    }

    pub(super) fn vote(
        &self,
        reply: std::result::Result<Vec<Value>, String>,
        lock_key: &str,
    ) -> Result<Vote> {
        let reply = match reply {
            Ok(r) => r,
            Err(e) => return Ok(Vote::Failed(e)),
        };
        let detail = reply.get(1);
        match reply.first().and_then(int) {
            Some(1) => detail
                .and_then(int)
                .and_then(|r| u64::try_from(r).ok())
                .map(Vote::Granted)
                .ok_or_else(|| self.protocol(format!("bad reading in {reply:?}"))),
            Some(0) => Ok(Vote::Held(
                detail
                    .and_then(int)
                    .and_then(|ms| u64::try_from(ms).ok())
                    .map(Duration::from_millis),
            )),
            Some(-1) => Err(self.protocol(format!(
                "key {lock_key} holds a {} that lockward did not write; it was left untouched",
                detail.and_then(text).unwrap_or_default()
            ))),
            Some(-2) => Err(self.protocol(format!(
                "key {lock_key} holds a value without expiry that lockward did not write; it was left untouched"
            ))),
            Some(-3) => Err(self.protocol(format!(
                "the fence counter of {lock_key} is not a number; it was left untouched"
            ))),
            Some(-4) => Err(self.protocol(format!(
                "the line of waiters of {lock_key} holds values that lockward did not write; they were left untouched"
            ))),
            _ => Err(self.protocol(format!("unexpected reply {reply:?}"))),
        }
    }
}
