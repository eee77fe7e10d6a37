//! The read side of a read-write lock on etcd: a key per reader on its own
//! lease beside the name's line of writers (see [`keys`]), ordered with
//! them by create revision, which is also every holder's fence.
//!
//! A reader holds while no writer's key is older than its own, so a
//! waiting writer keeps out the readers after it; it waits for the
//! deletion of the newest older writer's key, then looks again. A writer
//! first in its line waits the same way for the readers older than it.

use std::time::{Duration, Instant};

use etcd_client::GetOptions;

use super::core::{Contender, EtcdBackend, Wait};
use super::keys;
use crate::backend::{Grant, Kind, Request};
use crate::error::Result;
use crate::lease::{Holding, LockInfo};
use crate::name::Name;

impl EtcdBackend {
    /// Waits (up to `deadline`) until no writer's key is older than the
    /// reader's, then holds. Dropping the future revokes the reader's key.
    pub(super) async fn acquire_read(
        &self,
        req: &Request<'_>,
        deadline: Option<Instant>,
    ) -> Result<Option<Grant>> {
        let writers = keys::lock_prefix(&self.prefix, req.name);
        'line: loop {
            let entered = self.enter(req).await?;
            let held = entered.holds(Kind::Reader);
            let mut contender = entered.contender;
            if !held {
                contender.keepalive = Some(self.keep_alive_while_waiting(&contender, req.ttl / 3));
                match self
                    .wait_for_none_before(&writers, &contender, req.ttl, deadline)
                    .await?
                {
                    Some(true) => {}
                    Some(false) => continue 'line,
                    None => return Ok(None),
                }
            }
            return Ok(Some(self.take(req, contender)));
        }
    }

    /// Waits until no reader's key is older than the writer `contender`
    /// (first in its line): `Some(true)` then, `Some(false)` when its own
    /// lease lapsed meanwhile (join again), `None` at the deadline.
    pub(super) async fn wait_out_readers(
        &self,
        name: &Name,
        contender: &Contender<'_>,
        ttl: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<bool>> {
        let readers = keys::readers_prefix(&self.prefix, name);
        self.wait_for_none_before(&readers, contender, ttl, deadline)
            .await
    }

    /// Whether a reader's key of `name` is older than `revision`.
    pub(super) async fn readers_before(&self, name: &Name, revision: i64) -> Result<bool> {
        let readers = keys::readers_prefix(&self.prefix, name);
        let opts = GetOptions::new()
            .with_prefix()
            .with_max_create_revision(revision - 1)
            .with_count_only();
        let resp = self
            .call(|mut c| {
                let (key, opts) = (readers.clone(), opts.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        Ok(resp.count() > 0)
    }

    /// Waits until no key under `prefix` is older than `contender`'s.
    async fn wait_for_none_before(
        &self,
        prefix: &str,
        contender: &Contender<'_>,
        ttl: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<bool>> {
        loop {
            match self
                .wait_for_predecessor(prefix, contender.revision, deadline)
                .await?
            {
                Wait::TimedOut => return Ok(None),
                Wait::NoneBefore => return Ok(Some(contender.lease_alive(ttl))),
                Wait::Deleted(_) | Wait::Recheck => {}
            }
        }
    }

    /// A row per live reader of the names whose readers' keys are among
    /// `found`: `NAME#reader/OWNER`, as `status` shows readers on every
    /// store; the fence is the key's create revision.
    pub(super) async fn list_readers(&self, found: &[String]) -> Result<Vec<LockInfo>> {
        let mut names: Vec<Name> = found
            .iter()
            .filter_map(|k| keys::reader_name_of(&self.prefix, k))
            .filter_map(|n| Name::new(n).ok())
            .collect();
        names.dedup();
        let mut rows = Vec::new();
        for name in names {
            let prefix = keys::readers_prefix(&self.prefix, &name);
            let resp = self
                .call(|mut c| {
                    let key = prefix.clone();
                    async move { c.get(key, Some(GetOptions::new().with_prefix())).await }
                })
                .await?;
            for kv in resp.kvs() {
                let lease = kv.lease();
                let left = self
                    .call(|mut c| async move { c.lease_time_to_live(lease, None).await })
                    .await
                    .ok()
                    .map(|r| r.ttl())
                    .and_then(|s| u64::try_from(s).ok());
                let owner = String::from_utf8_lossy(kv.value()).into_owned();
                rows.push(LockInfo {
                    name: format!("{name}#reader/{owner}"),
                    owner,
                    label: None,
                    fence: u64::try_from(kv.create_revision()).ok(),
                    expires_in: left.map(Duration::from_secs),
                    waiters: None,
                    holding: Holding::Reader {
                        lock: name.to_string(),
                    },
                });
            }
        }
        Ok(rows)
    }
}
