//! ZooKeeper's lock seam, in Curator's layout (the requests to the
//! ensemble are in `requests.rs`, the line of contenders in `queue.rs`).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use zookeeper_client as zk;

use super::core::{now_millis, ZookeeperBackend, CAPABILITIES};
use super::paths;
use super::queue::node_data;
use crate::backend::{Attempt, Capabilities, Grant, LockBackend, PermitBackend, Request};
use crate::error::{Error, LostReason, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

#[async_trait]
impl LockBackend for ZookeeperBackend {
    fn max_ttl(&self) -> Option<Duration> {
        Some(self.session.timeout())
    }

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
        let epoch = self.session.epoch();
        let contender = self.enter(req).await?;
        match self.predecessor(&contender).await? {
            Ok(None) => {
                let fence = contender.fence;
                self.keep(contender, req, epoch);
                Ok(Attempt::Granted { fence })
            }
            // Someone is ahead: leave the line (the drop deletes our node).
            Ok(Some(_)) | Err(()) => Ok(Attempt::Held { expires_in: None }),
        }
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        'line: loop {
            let contender = self.enter(req).await?;
            loop {
                let epoch = self.session.epoch();
                let started = Instant::now();
                match self.predecessor(&contender).await? {
                    Ok(None) => {
                        let fence = contender.fence;
                        self.keep(contender, req, epoch);
                        return Ok(Some(Grant { fence, started }));
                    }
                    Ok(Some(before)) => {
                        if !self.wait_for(&contender.lock, &before, deadline).await? {
                            return Ok(None);
                        }
                    }
                    // Our node is gone (the session expired while we
                    // waited): join the line again.
                    Err(()) => continue 'line,
                }
            }
        }
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        self.check_ttl(ttl)?;
        let key = (name.clone(), owner);
        let Some((path, epoch, label)) = self
            .held()
            .get(&key)
            .map(|h| (h.path.clone(), h.epoch, h.label.clone()))
        else {
            return Err(Error::NotOwner {
                name: name.to_string(),
            });
        };
        let lost = || Error::Lost {
            name: name.to_string(),
            reason: LostReason::SessionEnded,
        };
        if self.session.epoch() != epoch {
            if let Some(h) = self.held().remove(&key) {
                h.timer.abort();
            }
            self.abandon(path);
            return Err(lost());
        }
        let data = node_data(owner, ttl, label.as_deref());
        let written = self
            .ask(true, |c| {
                let (path, data) = (path.clone(), data.clone());
                async move { c.set_data(&path, &data, None).await }
            })
            .await?;
        match written {
            Ok(_) if self.session.epoch() == epoch => {
                if let Some(h) = self.held().get(&key) {
                    *h.expiry.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now() + ttl;
                }
                Ok(())
            }
            Ok(_) => {
                if let Some(h) = self.held().remove(&key) {
                    h.timer.abort();
                }
                self.abandon(path);
                Err(lost())
            }
            Err(zk::Error::NoNode) => {
                if let Some(h) = self.held().remove(&key) {
                    h.timer.abort();
                }
                Err(Error::NotOwner {
                    name: name.to_string(),
                })
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let Some(held) = self.held().remove(&(name.clone(), owner)) else {
            return Err(Error::NotOwner {
                name: name.to_string(),
            });
        };
        held.timer.abort();
        if self.session.epoch() != held.epoch {
            self.abandon(held.path);
            return Err(Error::Lost {
                name: name.to_string(),
                reason: LostReason::SessionEnded,
            });
        }
        let deleted = match self.drop_node(&held.path).await {
            Ok(deleted) => deleted,
            Err(e) => {
                // Unanswered: keep trying in the background, or the node
                // would hold the lock for as long as our session lives.
                self.abandon(held.path);
                return Err(e);
            }
        };
        if deleted {
            Ok(())
        } else {
            Err(Error::NotOwner {
                name: name.to_string(),
            })
        }
    }

    /// Deletes the holder's node, found by its `czxid` (the fence), so
    /// that a node created since is never taken for it. The holder learns
    /// at its next renewal, which finds no node.
    async fn force_release(&self, name: &Name, holder: &LockInfo) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let lock = paths::lock_path(&self.root, name);
        let line = paths::in_line(self.children(&lock).await?.unwrap_or_default());
        let first = line.first().ok_or_else(not_owner)?;
        let path = format!("{lock}/{first}");
        match self.data(&path).await? {
            Ok((_, stat)) if Some(stat.czxid as u64) == holder.fence => {}
            Ok(_) | Err(zk::Error::NoNode) => return Err(not_owner()),
            Err(e) => return Err(self.fail(e)),
        }
        if self.drop_node(&path).await? {
            Ok(())
        } else {
            Err(not_owner())
        }
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let lock = paths::lock_path(&self.root, name);
        let line = paths::in_line(self.children(&lock).await?.unwrap_or_default());
        let Some(first) = line.first() else {
            return Ok(None);
        };
        self.describe(name, &lock, first, line.len() - 1).await
    }

    /// Every holder: the first in line, or, when readers hold, a row per
    /// reader (`NAME#reader/OWNER`, as on every store with readers).
    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let mut held = Vec::new();
        for name in self.names_under_root(prefix).await? {
            let lock = paths::lock_path(&self.root, &name);
            let line = paths::in_line(self.children(&lock).await?.unwrap_or_default());
            let waiters = line.len().saturating_sub(1);
            let readers: Vec<&String> = line.iter().take_while(|c| paths::is_reader(c)).collect();
            if readers.is_empty() {
                if let Some(first) = line.first() {
                    held.extend(self.describe(&name, &lock, first, waiters).await?);
                }
                continue;
            }
            for reader in readers {
                if let Some(mut row) = self.describe(&name, &lock, reader, waiters).await? {
                    row.name = format!("{name}#reader/{}", row.owner);
                    row.holding = Holding::Reader {
                        lock: name.to_string(),
                    };
                    held.push(row);
                }
            }
        }
        held.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(held)
    }
}

impl ZookeeperBackend {
    /// The names under the store's root that start with `prefix` (locks and
    /// semaphores alike: each is a node there).
    pub(super) async fn names_under_root(&self, prefix: &str) -> Result<Vec<Name>> {
        Ok(self
            .children(&self.root)
            .await?
            .unwrap_or_default()
            .iter()
            .filter_map(|c| paths::unescape(c))
            .filter(|n| n.starts_with(prefix))
            .filter_map(|n| Name::new(n).ok())
            .collect())
    }

    /// The contender node `node` of lock `name` (at `lock`) as a holder;
    /// `None` when it went in between.
    async fn describe(
        &self,
        name: &Name,
        lock: &str,
        first: &str,
        waiters: usize,
    ) -> Result<Option<LockInfo>> {
        let path = format!("{lock}/{first}");
        let (data, stat) = match self.data(&path).await? {
            Ok(found) => found,
            // Released in between.
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(self.fail(e)),
        };
        let text = String::from_utf8_lossy(&data).into_owned();
        let mut fields = text.splitn(3, '\n');
        let owner = fields.next().and_then(OwnerId::from_hex);
        let ttl_ms: Option<i64> = fields.next().and_then(|t| t.parse().ok());
        let label = fields.next().filter(|l| !l.is_empty()).map(str::to_string);
        let ours = self
            .held()
            .values()
            .find(|h| h.path == path)
            .map(|h| *h.expiry.lock().unwrap_or_else(|p| p.into_inner()));
        let expires_in = match (ours, ttl_ms) {
            (Some(at), _) => Some(at.saturating_duration_since(Instant::now())),
            // Another process's lock: its last renewal plus its TTL, by
            // this host's wall clock (approximate across hosts).
            (None, Some(ttl)) => {
                let left = stat.mtime.saturating_add(ttl) - now_millis();
                Some(Duration::from_millis(left.max(0) as u64))
            }
            (None, None) => None,
        };
        let (owner, label) = match owner {
            Some(owner) => (owner.to_string(), label),
            // Curator stores the client's address as the node's data.
            None => (
                format!("(curator) {first}"),
                Some(text).filter(|t| !t.is_empty()),
            ),
        };
        Ok(Some(LockInfo {
            name: name.to_string(),
            owner,
            label,
            fence: Some(stat.czxid as u64),
            expires_in,
            waiters: Some(waiters),
            holding: Holding::Lock,
        }))
    }
}
