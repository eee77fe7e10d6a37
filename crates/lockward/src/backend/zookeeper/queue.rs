//! The line of contenders on one ZooKeeper lock, in Curator's layout:
//! entering it (a create whose reply was lost is found again by its uuid),
//! finding one's predecessor, and waiting for it with one watch.

use std::time::{Duration, Instant};

use zookeeper_client as zk;
use zookeeper_client::CreateMode;

use super::core::{Contender, ZookeeperBackend, CALL_TIMEOUT, RETRY_PAUSE, WATCH_SAFETY_NET};
use super::paths;
use crate::backend::Request;
use crate::error::{Error, Result};
use crate::owner::OwnerId;

impl ZookeeperBackend {
    /// Joins the line of `req.name`: creates our contender node.
    pub(super) async fn enter(&self, req: &Request<'_>) -> Result<Contender<'_>> {
        self.check_ttl(req.ttl)?;
        self.enter_at(paths::lock_path(&self.root, req.name), req)
            .await
    }

    /// Joins the line of the lock node `lock` (a semaphore's internal lock
    /// is not a name's): creates our contender node.
    pub(super) async fn enter_at(&self, lock: String, req: &Request<'_>) -> Result<Contender<'_>> {
        let uuid = random_uuid();
        let prefix = paths::contender_prefix(&lock, &uuid, req.kind);
        let data = node_data(req.owner, req.ttl, req.label);
        let opts = self.options(CreateMode::EphemeralSequential);
        for _ in 0..8 {
            let created = self
                .ask(false, |c| {
                    let (prefix, data, opts) = (prefix.clone(), data.clone(), opts.clone());
                    async move { c.create(&prefix, &data, &opts).await }
                })
                .await?;
            match created {
                Ok((stat, sequence)) => {
                    return Ok(Contender {
                        backend: self,
                        node: paths::contender_name(&uuid, sequence.into_i64(), req.kind),
                        lock,
                        fence: stat.czxid as u64,
                        kept: false,
                    })
                }
                // The lock node is new, or its container was just removed.
                Err(zk::Error::NoNode) => self.make_parents(&lock).await?,
                Err(zk::Error::ConnectionLoss | zk::Error::Timeout) => {
                    if let Some(found) = self.find_contender(&lock, &uuid).await? {
                        return Ok(found);
                    }
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
        Err(Error::Protocol {
            address: self.address.clone(),
            message: format!("could not create a contender node under {lock}"),
            cause: None,
        })
    }

    /// Finds the node of a contender whose create reply was lost.
    pub(super) async fn find_contender(
        &self,
        lock: &str,
        uuid: &str,
    ) -> Result<Option<Contender<'_>>> {
        let Some(children) = self.children(lock).await? else {
            return Ok(None);
        };
        let Some(node) = children.into_iter().find(|c| paths::is_ours(c, uuid)) else {
            return Ok(None);
        };
        let path = format!("{lock}/{node}");
        match self.ask(true, |c| c.check_stat(&path)).await? {
            Ok(Some(stat)) => Ok(Some(Contender {
                backend: self,
                lock: lock.to_string(),
                node,
                fence: stat.czxid as u64,
                kept: false,
            })),
            Ok(None) => Ok(None),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The contender ours waits for, or `None` when ours holds: for a
    /// mutex or a writer the one just before it; for a reader the first
    /// one ahead that is not a reader (as Curator's read lock decides).
    /// `Ok(Err(()))`: our node no longer exists.
    pub(super) async fn predecessor(
        &self,
        contender: &Contender<'_>,
    ) -> Result<std::result::Result<Option<String>, ()>> {
        let line = paths::in_line(self.children(&contender.lock).await?.unwrap_or_default());
        let Some(ours) = line.iter().position(|c| *c == contender.node) else {
            return Ok(Err(()));
        };
        if paths::is_reader(&contender.node) {
            return Ok(Ok(line[..ours]
                .iter()
                .find(|c| !paths::is_reader(c))
                .cloned()));
        }
        Ok(Ok(ours.checked_sub(1).map(|i| line[i].clone())))
    }

    /// Waits until `node` (a child of `lock`) changes, the safety net
    /// passes, or `deadline` passes (`false`).
    pub(super) async fn wait_for(
        &self,
        lock: &str,
        node: &str,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        let path = format!("{lock}/{node}");
        let (client, _) = self.session.client();
        let watched = tokio::time::timeout(CALL_TIMEOUT, client.check_and_watch_stat(&path)).await;
        let watcher = match watched {
            Ok(Ok((Some(_), watcher))) => watcher,
            // Gone already: look again at once.
            Ok(Ok((None, _))) => return Ok(true),
            Ok(Err(zk::Error::SessionExpired | zk::Error::ClientClosed)) => {
                self.session.renew(client.session_id()).await?;
                return Ok(true);
            }
            Ok(Err(_)) | Err(_) => {
                tokio::time::sleep(RETRY_PAUSE * 5).await;
                return Ok(deadline.is_none_or(|d| Instant::now() < d));
            }
        };
        let net = Instant::now() + WATCH_SAFETY_NET;
        let wake = deadline.map_or(net, |d| d.min(net));
        let _ = tokio::time::timeout_at(wake.into(), watcher.changed()).await;
        Ok(deadline.is_none_or(|d| Instant::now() < d))
    }
}

/// What a contender node stores: the owner, the TTL and the label.
pub(super) fn node_data(owner: OwnerId, ttl: Duration, label: Option<&str>) -> Vec<u8> {
    format!("{owner}\n{}\n{}", ttl.as_millis(), label.unwrap_or("")).into_bytes()
}

/// A uuid (Curator's protection id) made of 16 random bytes.
pub(super) fn random_uuid() -> String {
    let hex = OwnerId::random().to_string();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_look_like_curators() {
        let uuid = random_uuid();
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid.matches('-').count(), 4);
        assert_ne!(uuid, random_uuid());
    }
}
