//! A held node's life on ZooKeeper: the store's own timer that deletes it
//! when its TTL passed without renewal, and deleting the nodes a holder let
//! go, retried for as long as their session lives.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::core::{
    Contender, Held, Locks, ZookeeperBackend, ABANDON_LIMIT, CALL_TIMEOUT, RETRY_PAUSE,
};
use super::session::Session;
use crate::backend::Request;
use crate::error::Result;
use crate::name::Name;
use crate::owner::OwnerId;

impl ZookeeperBackend {
    /// We hold the lock: keep the node, start its TTL timer.
    pub(super) fn keep(&self, mut contender: Contender<'_>, req: &Request<'_>, epoch: u64) {
        contender.kept = true;
        let path = contender.path();
        let expiry = Arc::new(Mutex::new(Instant::now() + req.ttl));
        let timer = self.runtime.spawn(expire(
            self.session.clone(),
            self.held.clone(),
            (req.name.clone(), req.owner),
            path.clone(),
            expiry.clone(),
        ));
        let old = self.held().insert(
            (req.name.clone(), req.owner),
            Held {
                path,
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

    /// Deletes a node we no longer want, in the background, retrying
    /// through disconnections: a node left behind would block its line
    /// for as long as our session lives.
    pub(super) fn abandon(&self, path: String) {
        self.runtime
            .spawn(delete_until_gone(self.session.clone(), path));
    }

    /// Forgets a lock; deletes its node when it is still ours.
    pub(super) async fn drop_node(&self, path: &str) -> Result<bool> {
        match self.ask(true, |c| c.delete(path, None)).await? {
            Ok(()) => Ok(true),
            Err(zk::Error::NoNode) => Ok(false),
            Err(e) => Err(self.fail(e)),
        }
    }
}

/// Deletes a held lock's node once its TTL passed without renewal.
pub(super) async fn expire(
    session: Arc<Session>,
    held: Locks,
    key: (Name, OwnerId),
    path: String,
    expiry: Arc<Mutex<Instant>>,
) {
    until_expired(&expiry).await;
    {
        let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
        if held.get(&key).is_some_and(|h| h.path == path) {
            held.remove(&key);
        }
    }
    delete_until_gone(session, path).await;
}

/// Returns once `expiry` has passed; a renewal moves it meanwhile.
pub(super) async fn until_expired(expiry: &Mutex<Instant>) {
    loop {
        let at = *expiry.lock().unwrap_or_else(|p| p.into_inner());
        tokio::time::sleep_until(at.into()).await;
        if Instant::now() >= *expiry.lock().unwrap_or_else(|p| p.into_inner()) {
            return;
        }
    }
}

/// Deletes `path`, retrying through disconnections, until it is gone or
/// the session that created it is (its ephemeral nodes go with it): while
/// that session lives, the node blocks its line. Gives up only after
/// [`ABANDON_LIMIT`] (an ensemble gone for good).
pub(super) async fn delete_until_gone(session: Arc<Session>, path: String) {
    let (first, _) = session.client();
    let owner = first.session_id();
    drop(first);
    let mut pause = RETRY_PAUSE;
    let give_up = Instant::now() + ABANDON_LIMIT;
    while Instant::now() < give_up {
        let (client, _) = session.client();
        if client.session_id() != owner || client.state().is_terminated() {
            return;
        }
        match tokio::time::timeout(CALL_TIMEOUT, client.delete(&path, None)).await {
            Ok(Ok(()) | Err(zk::Error::NoNode)) => return,
            Ok(Err(zk::Error::SessionExpired | zk::Error::ClientClosed)) => return,
            Ok(Err(_)) | Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}
