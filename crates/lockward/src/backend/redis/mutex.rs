//! Redis's lock seam: acquire, wait in the name's line, extend, release,
//! inspect, list.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::Value;

use super::codec::{int, text};
use super::core::{RedisBackend, CAPABILITIES};
use super::{conn, keys};
use crate::backend::time::ttl_millis;
use crate::backend::{
    Attempt, Capabilities, Grant, InLine, Kind, Leave, LockBackend, PermitBackend, Request,
    Subscription,
};
use crate::error::Result;
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

#[async_trait]
impl LockBackend for RedisBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        self.address.clone()
    }

    fn permits(&self) -> Option<&dyn PermitBackend> {
        Some(self)
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        self.attempt(req, None).await
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        crate::backend::acquire_in_line(self, req, deadline).await
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let keys = self.keys(name);
        let (done, _): (i64, _) = self
            .invoke(
                self.reader_scripts
                    .extend
                    .key(&keys.lock)
                    .key(&keys.holder)
                    .key(&keys.readers)
                    .arg(owner.to_string())
                    .arg(ttl_millis(ttl)),
            )
            .await?;
        crate::backend::owner_checked(name, u64::try_from(done).unwrap_or(0))?;
        self.confirm_replicated(&format!("the renewal of {:?}", name.as_str()))
            .await
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let keys = self.keys(name);
        let (done, retried): (i64, _) = self
            .invoke(
                self.reader_scripts
                    .release
                    .key(&keys.lock)
                    .key(&keys.channel)
                    .key(&keys.holder)
                    .key(&keys.queue)
                    .key(&keys.places)
                    .key(&keys.readers)
                    .arg(owner.to_string()),
            )
            .await?;
        // After a dropped connection the first attempt may have released it
        // already; either way the lock is no longer ours, which is the point.
        if retried && done == 0 {
            return Ok(());
        }
        crate::backend::owner_checked(name, u64::try_from(done).unwrap_or(0))
    }

    async fn force_hold_back(
        &self,
        name: &Name,
        holder: &LockInfo,
        placeholder: OwnerId,
        label: &str,
    ) -> Result<()> {
        let keys = self.keys(name);
        let (done, retried): (i64, _) = self
            .invoke(
                self.scripts
                    .hold_back
                    .key(&keys.lock)
                    .key(&keys.holder)
                    .arg(&holder.owner)
                    .arg(placeholder.to_string())
                    .arg(label),
            )
            .await?;
        // A retry after a dropped connection finds the placeholder already
        // there: handed over either way.
        if retried && done == 0 {
            return Ok(());
        }
        crate::backend::owner_checked(name, u64::try_from(done).unwrap_or(0))
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let keys = self.keys(name);
        let (reply, _): (Vec<Value>, _) = self
            .invoke(
                self.scripts
                    .inspect
                    .key(&keys.lock)
                    .key(&keys.fence)
                    .key(&keys.holder)
                    .key(&keys.queue),
            )
            .await?;
        let owner = reply.first().and_then(text);
        let pttl = reply.get(1).and_then(int).unwrap_or(-2);
        let Some(owner) = owner.filter(|_| pttl != -2) else {
            return Ok(None);
        };
        // The counter is the holder's fence only when lockward wrote the key.
        let fence = reply
            .get(2)
            .and_then(int)
            .and_then(|f| u64::try_from(f).ok())
            .filter(|_| OwnerId::from_hex(&owner).is_some());
        Ok(Some(LockInfo {
            name: name.to_string(),
            owner,
            label: reply.get(3).and_then(text),
            fence,
            expires_in: u64::try_from(pttl).ok().map(Duration::from_millis),
            waiters: reply
                .get(4)
                .and_then(int)
                .and_then(|n| usize::try_from(n).ok()),
            holding: Holding::Lock,
        }))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let pattern = keys::scan_pattern(&self.prefix, prefix, self.cluster);
        let found = conn::scan_all(&self.conn, &pattern)
            .await
            .map_err(|e| self.unavailable(e))?;
        let names: Vec<Name> = found
            .iter()
            .filter_map(|k| k.strip_prefix(self.prefix.as_str()))
            .filter_map(|k| keys::name_of(k, self.cluster))
            .filter_map(|n| Name::new(n).ok())
            .collect();
        let mut held = crate::backend::inspect_each(self, names).await?;
        held.extend(self.list_readers(prefix).await?);
        held.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(held)
    }
}

impl RedisBackend {
    /// One run of the acquire script (the read script for a reader);
    /// `place` joins the line (or renews the caller's place) for that long.
    async fn attempt(&self, req: &Request<'_>, place: Option<Duration>) -> Result<Attempt> {
        let keys = self.keys(req.name);
        // A reader's script takes the same keys and arguments.
        let script = if req.kind == Kind::Reader {
            &self.reader_scripts.read
        } else {
            &self.scripts.acquire
        };
        let (reply, _): (Vec<Value>, _) = self
            .invoke(
                script
                    .key(&keys.lock)
                    .key(&keys.fence)
                    .key(&keys.holder)
                    .key(&keys.queue)
                    .key(&keys.places)
                    .key(&keys.channel)
                    .key(&keys.readers)
                    .arg(req.owner.to_string())
                    .arg(ttl_millis(req.ttl))
                    .arg(req.label.unwrap_or(""))
                    .arg(place.map_or(0, ttl_millis)),
            )
            .await?;
        let attempt = acquire_reply(&reply, &keys).map_err(|message| self.protocol(message))?;
        if matches!(attempt, Attempt::Granted { .. }) {
            let what = format!("the grant of {:?}", req.name.as_str());
            if let Err(e) = self.confirm_replicated(&what).await {
                // Undone, so nobody holds what the caller is told it lacks.
                let _ = self.release(req.name, req.owner).await;
                return Err(e);
            }
        }
        Ok(attempt)
    }
}

/// What the acquire script answered (see `lua/acquire.lua`), or
/// why it is not lockward's.
fn acquire_reply(reply: &[Value], keys: &keys::Keys) -> std::result::Result<Attempt, String> {
    let detail = reply.get(1);
    match reply.first().and_then(int) {
        Some(1) => {
            let fence = detail
                .and_then(int)
                .and_then(|f| u64::try_from(f).ok())
                .filter(|f| *f > 0)
                .ok_or_else(|| format!("bad fence in {reply:?}"))?;
            Ok(Attempt::Granted { fence })
        }
        Some(0) => Ok(Attempt::Held {
            expires_in: detail
                .and_then(int)
                .and_then(|ms| u64::try_from(ms).ok())
                .map(Duration::from_millis),
        }),
        Some(-1) => Err(format!(
            "key {} holds a {} that lockward did not write; it was left untouched",
            keys.lock,
            detail.and_then(text).unwrap_or_default()
        )),
        Some(-2) => Err(format!(
            "key {} holds a value without expiry that lockward did not write; it was left untouched",
            keys.lock
        )),
        Some(-3) => Err(format!(
            "fence counter {} is not a number; it was left untouched",
            keys.fence
        )),
        Some(-4) => Err(format!(
            "the line of waiters {} or {} holds values that lockward did not write; they were left untouched",
            keys.queue, keys.places
        )),
        _ => Err(format!("unexpected acquire reply {reply:?}")),
    }
}

#[async_trait]
impl InLine for RedisBackend {
    async fn try_in_line(
        &self,
        req: &Request<'_>,
        place: Duration,
        _ticket: u64,
    ) -> Result<Attempt> {
        self.attempt(req, Some(place)).await
    }

    async fn subscribe_turn(&self, name: &Name, owner: OwnerId) -> Result<Subscription> {
        let keys = self.keys(name);
        let wakeup = self
            .channels
            .subscribe(&keys::turn_channel(&keys, &owner.to_string()))
            .await
            .map_err(|e| self.unavailable(e))?;
        Ok(Subscription::pushed(wakeup))
    }

    fn leave_line(&self, name: &Name, owner: OwnerId) -> Leave {
        let keys = self.keys(name);
        let (mut conn, leave) = (self.conn.clone(), self.scripts.leave.clone());
        Box::pin(async move {
            let mut call = leave.key(&keys.lock);
            call.key(&keys.channel)
                .key(&keys.queue)
                .key(&keys.places)
                .arg(owner.to_string());
            // Best effort: a place left behind lapses with its lease.
            let _ = call.invoke_async::<i64>(&mut conn).await;
        })
    }
}
