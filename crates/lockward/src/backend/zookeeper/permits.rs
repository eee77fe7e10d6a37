//! Semaphores kept by ZooKeeper in the layout of Curator's
//! `InterProcessSemaphoreV2`, so that Java services on Curator and lockward
//! share one semaphore: a lease node per permit under `ROOT/esc(N)/leases`
//! (ephemeral sequential, `_c_<uuid>-lease-<sequence>`), taken only while
//! holding the semaphore's internal lock `ROOT/esc(N)/locks` (an
//! `InterProcessMutex`).
//!
//! A take holds the internal lock, counts the leases by their parent's
//! `numChildren` (one read, whatever the number of holders; Curator lists
//! them), creates its `k` lease nodes in batched multi-requests when they
//! fit, and lets go of the internal lock. A holder's nodes live with its
//! session and, like a lock's, are deleted by the store's own timer when
//! its TTL passes without renewal. Curator's waiters wait while holding the
//! internal lock (while nothing is free); a take that finds the internal
//! lock held is refused at once when the permits do not fit, and else waits
//! for it up to [`INTERNAL_LOCK_WAIT`], then is refused with the count of
//! free permits it then reads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use zookeeper_client as zk;
use zookeeper_client::{CreateMode, MultiWriteResult};

use super::core::{LeaseHeld, LeaseHolds, ZookeeperBackend, CALL_TIMEOUT};
use super::held::{delete_until_gone, until_expired};
use super::paths;
use super::queue::{node_data, random_uuid};
use super::session::Session;
use crate::backend::{no_permits, permit_row, Kind, PermitBackend, Request};
use crate::error::{Error, LostReason, Result};
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

/// How long a take that may fit waits for the semaphore's internal lock.
/// Other takes hold it for a few round trips each, so only a holder of it
/// that is stuck (or Curator's waiter, while nothing is free) makes a take
/// wait this long; a queue of takes on a loaded machine does not.
pub(super) const INTERNAL_LOCK_WAIT: Duration = Duration::from_secs(10);

/// How many lease nodes one multi-request creates (each is a few hundred
/// bytes of a request the server caps at 1 MB).
const NODES_PER_REQUEST: usize = 500;

impl ZookeeperBackend {
    fn lease_holds(&self) -> std::sync::MutexGuard<'_, HashMap<(Name, OwnerId), LeaseHeld>> {
        self.lease_holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The number of lease nodes of the semaphore (0 before its first).
    async fn leases_held(&self, leases: &str) -> Result<u64> {
        match self.ask(true, |c| c.check_stat(leases)).await? {
            Ok(Some(stat)) => Ok(u64::try_from(stat.num_children).unwrap_or(0)),
            Ok(None) => Ok(0),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Creates `k` lease nodes for `req`; their paths and the first one's
    /// `czxid`. A batch whose answer was lost is looked for by its uuid
    /// and deleted, and the take fails.
    async fn create_leases(
        &self,
        leases: &str,
        req: &Request<'_>,
        k: u32,
    ) -> Result<(Vec<String>, u64)> {
        let uuid = random_uuid();
        let prefix = paths::lease_prefix(leases, &uuid);
        let data = node_data(req.owner, req.ttl, req.label);
        let opts = self.options(CreateMode::EphemeralSequential);
        let mut nodes = Vec::with_capacity(k as usize);
        let mut fence = 0;
        let mut left = k as usize;
        while left > 0 {
            let batch = left.min(NODES_PER_REQUEST);
            let created = self
                .ask(false, |c| {
                    let (prefix, data, opts) = (prefix.clone(), data.clone(), opts.clone());
                    async move {
                        let mut writer = c.new_multi_writer();
                        for _ in 0..batch {
                            writer.add_create(&prefix, &data, &opts)?;
                        }
                        writer.commit().await.map_err(zk::Error::from)
                    }
                })
                .await;
            let results = match created {
                Ok(Ok(results)) => results,
                Ok(Err(zk::Error::NoNode)) if nodes.is_empty() => {
                    self.make_parents(leases).await?;
                    continue;
                }
                failed => {
                    self.abandon_ours(leases, &uuid, nodes).await;
                    return Err(match failed {
                        Ok(Err(e)) => self.fail(e),
                        Err(e) => e,
                        Ok(Ok(_)) => unreachable!("matched above"),
                    });
                }
            };
            for result in results {
                if let MultiWriteResult::Create { path, stat } = result {
                    if fence == 0 {
                        fence = u64::try_from(stat.czxid).unwrap_or(0);
                    }
                    nodes.push(path);
                }
            }
            left -= batch;
        }
        if fence == 0 {
            // The server may answer a create in a multi-request without its
            // stat (ZOOKEEPER-4026): read it.
            if let Some(first) = nodes.first() {
                if let Ok((_, stat)) = self.data(first).await? {
                    fence = u64::try_from(stat.czxid).unwrap_or(0);
                }
            }
        }
        Ok((nodes, fence))
    }

    /// Deletes the lease nodes of a take that failed: those it knows and
    /// any of its uuid a lost answer created.
    async fn abandon_ours(&self, leases: &str, uuid: &str, mut nodes: Vec<String>) {
        if let Ok(Some(children)) = self.children(leases).await {
            let mark = format!("_c_{uuid}-lease-");
            nodes.extend(
                children
                    .into_iter()
                    .filter(|c| c.starts_with(&mark))
                    .map(|c| format!("{leases}/{c}")),
            );
        }
        nodes.sort();
        nodes.dedup();
        let session = self.session.clone();
        self.runtime
            .spawn(async move { delete_leases(&session, nodes).await });
    }

    /// Forgets a holder whose nodes are no longer its own, deleting them
    /// in the background.
    fn forget_leases(&self, key: &(Name, OwnerId)) {
        if let Some(held) = self.lease_holds().remove(key) {
            held.timer.abort();
            let session = self.session.clone();
            self.runtime
                .spawn(async move { delete_leases(&session, held.nodes).await });
        }
    }

    /// We hold the permits: keep the nodes, start their TTL timer.
    fn keep_leases(&self, req: &Request<'_>, nodes: Vec<String>, epoch: u64) {
        let key = (req.name.clone(), req.owner);
        let expiry = Arc::new(Mutex::new(Instant::now() + req.ttl));
        let timer = self.runtime.spawn(expire_leases(
            self.session.clone(),
            self.lease_holds.clone(),
            key.clone(),
            expiry.clone(),
        ));
        let old = self.lease_holds().insert(
            key,
            LeaseHeld {
                nodes,
                epoch,
                label: req.label.map(str::to_string),
                expiry,
                timer,
            },
        );
        if let Some(old) = old {
            old.timer.abort();
        }
    }
}

/// Deletes a holder's lease nodes once its TTL passed without renewal.
async fn expire_leases(
    session: Arc<Session>,
    holds: LeaseHolds,
    key: (Name, OwnerId),
    expiry: Arc<Mutex<Instant>>,
) {
    until_expired(&expiry).await;
    let held = holds.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
    delete_leases(&session, held.map(|h| h.nodes).unwrap_or_default()).await;
}

/// Deletes lease nodes, many per request; a batch the server refuses (a
/// node already gone) or that goes unanswered is deleted node by node,
/// retried for as long as the session lives.
/// Whose lease node `child` is: the owner id lockward's nodes start their
/// data with, or `(curator) NODE` for each of Curator's (one permit each).
fn lease_owner(child: &str, data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    text.lines()
        .next()
        .filter(|o| OwnerId::from_hex(o).is_some())
        .map_or_else(|| format!("(curator) {child}"), str::to_string)
}

async fn delete_leases(session: &Arc<Session>, nodes: Vec<String>) {
    for batch in nodes.chunks(NODES_PER_REQUEST) {
        let (client, _) = session.client();
        let mut writer = client.new_multi_writer();
        let mut added = true;
        for node in batch {
            added &= writer.add_delete(node, None).is_ok();
        }
        let deleted = added
            && matches!(
                tokio::time::timeout(CALL_TIMEOUT, writer.commit()).await,
                Ok(Ok(_))
            );
        if !deleted {
            for node in batch {
                delete_until_gone(session.clone(), node.clone()).await;
            }
        }
    }
}

#[async_trait]
impl PermitBackend for ZookeeperBackend {
    async fn take_permits(&self, req: &Request<'_>, of: u32, take: u32) -> Result<u64> {
        self.check_ttl(req.ttl)?;
        let (locks, leases) = paths::semaphore_paths(&self.root, req.name);
        let epoch = self.session.epoch();
        let internal = Request {
            kind: Kind::Mutex,
            label: None,
            ..req.clone()
        };
        let mut contender = self.enter_at(locks.clone(), &internal).await?;
        let until = Instant::now() + INTERNAL_LOCK_WAIT;
        let mut looked = false;
        loop {
            match self.predecessor(&contender).await? {
                Ok(None) => break,
                Ok(Some(before)) => {
                    // Someone has the internal lock: a take that cannot fit
                    // is refused now rather than after the wait (a refusal
                    // needs no lock).
                    if !looked {
                        looked = true;
                        let held = self.leases_held(&leases).await?;
                        if held + u64::from(take) > u64::from(of) {
                            let free = u64::from(of).saturating_sub(held);
                            return Err(no_permits(req.name.as_str(), take, free, of));
                        }
                    }
                    if !self.wait_for(&locks, &before, Some(until)).await? {
                        // Held by a waiter (Curator's wait holding it): say
                        // what is free now.
                        let held = self.leases_held(&leases).await?;
                        let free = u64::from(of).saturating_sub(held);
                        return Err(no_permits(req.name.as_str(), take, free, of));
                    }
                }
                Err(()) => {
                    return Err(Error::Lost {
                        name: req.name.to_string(),
                        reason: LostReason::SessionEnded,
                    })
                }
            }
        }
        let held = self.leases_held(&leases).await?;
        let outcome = if held + u64::from(take) > u64::from(of) {
            Err(no_permits(
                req.name.as_str(),
                take,
                u64::from(of).saturating_sub(held),
                of,
            ))
        } else {
            self.create_leases(&leases, req, take).await
        };
        // Let go of the internal lock now, not in the background: the
        // next take waits for it.
        contender.kept = true;
        if self.drop_node(&contender.path()).await.is_err() {
            self.abandon(contender.path());
        }
        let (nodes, fence) = outcome?;
        self.keep_leases(req, nodes, epoch);
        Ok(fence)
    }

    async fn extend_permits(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        self.check_ttl(ttl)?;
        let key = (name.clone(), owner);
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let Some((first, epoch, label)) = self
            .lease_holds()
            .get(&key)
            .and_then(|h| Some((h.nodes.first()?.clone(), h.epoch, h.label.clone())))
        else {
            return Err(not_owner());
        };
        if self.session.epoch() != epoch {
            self.forget_leases(&key);
            return Err(Error::Lost {
                name: name.to_string(),
                reason: LostReason::SessionEnded,
            });
        }
        // The first node's data says the TTL; its mtime, the last renewal.
        let data = node_data(owner, ttl, label.as_deref());
        match self
            .ask(true, |c| {
                let (first, data) = (first.clone(), data.clone());
                async move { c.set_data(&first, &data, None).await }
            })
            .await?
        {
            Ok(_) => {
                if let Some(h) = self.lease_holds().get(&key) {
                    *h.expiry.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now() + ttl;
                }
                Ok(())
            }
            Err(zk::Error::NoNode) => {
                self.forget_leases(&key);
                Err(not_owner())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    async fn release_permits(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let Some(held) = self.lease_holds().remove(&(name.clone(), owner)) else {
            return Err(Error::NotOwner {
                name: name.to_string(),
            });
        };
        held.timer.abort();
        // Live when its first node still exists (the others go with it).
        let live = match held.nodes.first() {
            Some(first) => matches!(
                self.ask(true, |c| c.check_stat(first)).await,
                Ok(Ok(Some(_)))
            ),
            None => false,
        };
        delete_leases(&self.session, held.nodes).await;
        if live {
            Ok(())
        } else {
            Err(Error::NotOwner {
                name: name.to_string(),
            })
        }
    }

    async fn permits_held(&self, name: &Name) -> Result<u64> {
        let (_, leases) = paths::semaphore_paths(&self.root, name);
        self.leases_held(&leases).await
    }

    /// Deletes the holder's lease nodes, found by the owner its row shows
    /// (reads every lease node, as `list_permits` does).
    async fn force_release_permits(&self, name: &Name, holder: &LockInfo) -> Result<()> {
        let (_, leases) = paths::semaphore_paths(&self.root, name);
        let mut nodes = Vec::new();
        for child in self.children(&leases).await?.unwrap_or_default() {
            let path = format!("{leases}/{child}");
            if let Ok((data, _)) = self.data(&path).await? {
                if lease_owner(&child, &data) == holder.owner {
                    nodes.push(path);
                }
            }
        }
        if nodes.is_empty() {
            return Err(Error::NotOwner {
                name: holder.name.clone(),
            });
        }
        delete_leases(&self.session, nodes).await;
        Ok(())
    }

    async fn list_permits(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let mut rows = Vec::new();
        for name in self.names_under_root(prefix).await? {
            let (_, leases) = paths::semaphore_paths(&self.root, &name);
            let Some(children) = self.children(&leases).await? else {
                continue;
            };
            // One row per holder: lockward's nodes say their owner; each of
            // Curator's is a holder of one permit.
            let mut seen: HashMap<String, u64> = HashMap::new();
            for child in children {
                let path = format!("{leases}/{child}");
                let Ok((data, stat)) = self.data(&path).await? else {
                    continue;
                };
                let owner = lease_owner(&child, &data);
                let fence = u64::try_from(stat.czxid).unwrap_or(0);
                let first = seen.entry(owner).or_insert(fence);
                *first = (*first).min(fence);
            }
            for (owner, fence) in seen {
                rows.push(permit_row(
                    name.as_str(),
                    &owner,
                    owner.clone(),
                    Some(fence),
                ));
            }
        }
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows)
    }
}
