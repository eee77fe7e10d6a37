//! The ZooKeeper store: its session, and the lock seam in Curator's layout.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use zookeeper_client as zk;
use zookeeper_client::{Acls, Client, CreateMode, CreateOptions};

use super::paths;
use crate::backend::{Attempt, Capabilities, Grant, LockBackend, Request};
use crate::error::{Error, LostReason, Result};
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;
use crate::url::{StoreUrl, ZookeeperUrl};

use super::session::{unavailable, Session};

/// Bound on each request, retries of a dropped connection included.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause before re-sending a request whose connection was lost.
const RETRY_PAUSE: Duration = Duration::from_millis(20);
/// How long a node we no longer want is retried for deletion.
const ABANDON_LIMIT: Duration = Duration::from_secs(600);
/// A waiter re-checks at least this often even while its watch is quiet.
const WATCH_SAFETY_NET: Duration = Duration::from_secs(2);

/// A request's answer from the server.
pub(super) type ZkResult<T> = std::result::Result<T, zk::Error>;

pub(super) type Locks = Arc<Mutex<HashMap<(Name, OwnerId), Held>>>;

/// The ZooKeeper backend.
pub struct ZookeeperBackend {
    pub(super) address: String,
    pub(super) root: String,
    pub(super) acls: Acls<'static>,
    pub(super) session: Arc<Session>,
    /// The node of each lock this store holds.
    pub(super) held: Locks,
    /// The runtime the session runs on: TTL timers and clean-ups run there
    /// too, so they keep time even when the caller's runtime is stalled.
    pub(super) runtime: tokio::runtime::Handle,
}

/// A lock this store holds.
pub(super) struct Held {
    /// Our node's full path.
    path: String,
    /// The session epoch the lock was confirmed in.
    epoch: u64,
    /// The label it was taken with, kept in the node's data.
    label: Option<String>,
    /// When our own timer deletes the node unless renewed.
    expiry: Arc<Mutex<Instant>>,
    timer: tokio::task::JoinHandle<()>,
}

/// A contender node that is deleted unless we end up holding it.
pub(super) struct Contender<'a> {
    backend: &'a ZookeeperBackend,
    lock: String,
    /// The node's name (a child of `lock`).
    node: String,
    fence: u64,
    kept: bool,
}

impl Contender<'_> {
    fn path(&self) -> String {
        format!("{}/{}", self.lock, self.node)
    }
}

impl Drop for Contender<'_> {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        self.backend.abandon(self.path());
    }
}

/// What a contender node stores: the owner, the TTL and the label.
fn node_data(owner: OwnerId, ttl: Duration, label: Option<&str>) -> Vec<u8> {
    format!("{owner}\n{}\n{}", ttl.as_millis(), label.unwrap_or("")).into_bytes()
}

/// A uuid (Curator's protection id) made of 16 random bytes.
fn random_uuid() -> String {
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

pub(super) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl ZookeeperBackend {
    /// Connects to the ensemble of `url`.
    pub async fn connect(url: &ZookeeperUrl) -> Result<Self> {
        let address = StoreUrl::Zookeeper(url.clone()).to_string();
        let session = Arc::new(Session::connect(url, address.clone()).await?);
        let backend = ZookeeperBackend {
            address,
            root: paths::root(&url.chroot),
            acls: super::session::acls(url),
            session,
            held: Arc::new(Mutex::new(HashMap::new())),
            runtime: tokio::runtime::Handle::current(),
        };
        // A round trip now, so bad credentials or a missing quorum fail
        // here, clearly.
        let root = backend.root.clone();
        match backend.ask(true, |c| c.check_stat(&root)).await? {
            Ok(_) => Ok(backend),
            Err(e) => Err(unavailable(&backend.address, &e)),
        }
    }

    /// The session timeout the server granted: the longest TTL a lock may
    /// have on this store.
    pub fn session_timeout(&self) -> Duration {
        self.session.timeout()
    }

    pub(super) fn held(&self) -> std::sync::MutexGuard<'_, HashMap<(Name, OwnerId), Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn fail(&self, e: zk::Error) -> Error {
        unavailable(&self.address, &e)
    }

    /// Runs one request on the current session, bounded by
    /// [`CALL_TIMEOUT`]. An expired session is replaced and the request
    /// sent again. With `repeatable`, a request whose connection dropped is
    /// sent again too; otherwise `ConnectionLoss` or `Timeout` comes back
    /// as the inner error, since the request may or may not have applied.
    pub(super) async fn ask<T, F, Fut>(&self, repeatable: bool, op: F) -> Result<ZkResult<T>>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = ZkResult<T>>,
    {
        let until = Instant::now() + CALL_TIMEOUT;
        loop {
            let (client, _) = self.session.client();
            let id = client.session_id();
            match tokio::time::timeout_at(until.into(), op(client)).await {
                Err(_) if repeatable => {
                    return Err(Error::Unavailable {
                        address: self.address.clone(),
                        message: format!("no answer within {CALL_TIMEOUT:?}"),
                    })
                }
                Err(_) => return Ok(Err(zk::Error::Timeout)),
                Ok(Err(zk::Error::SessionExpired | zk::Error::ClientClosed)) => {
                    self.session.renew(id).await?;
                    if Instant::now() >= until {
                        return Err(self.fail(zk::Error::SessionExpired));
                    }
                }
                Ok(Err(zk::Error::ConnectionLoss)) if repeatable => {
                    if Instant::now() + RETRY_PAUSE >= until {
                        return Err(self.fail(zk::Error::ConnectionLoss));
                    }
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Ok(answer) => return Ok(answer),
            }
        }
    }

    pub(super) fn options(&self, mode: CreateMode) -> CreateOptions<'static> {
        mode.with_acls(self.acls)
    }

    /// Creates `path` and its missing parents as container nodes.
    pub(super) async fn make_parents(&self, path: &str) -> Result<()> {
        let opts = self.options(CreateMode::Container);
        match self
            .ask(true, |c| {
                let opts = opts.clone();
                async move { c.mkdir(path, &opts).await }
            })
            .await?
        {
            Ok(()) | Err(zk::Error::NodeExists) => Ok(()),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Refuses a TTL longer than the session: the server could then free
    /// the lock (at session expiry) before the holder's deadline.
    pub(super) fn check_ttl(&self, ttl: Duration) -> Result<()> {
        let session = self.session.timeout();
        if ttl > session {
            return Err(Error::InvalidArgument {
                what: "ttl",
                why: format!(
                    "a ZooKeeper lock cannot outlive its session: the TTL {ttl:?} is longer than \
                     the session timeout {session:?}; lower the TTL or raise session_timeout= in \
                     the URL (the server caps it at its maxSessionTimeout)"
                ),
            });
        }
        Ok(())
    }

    /// Joins the line of `req.name`: creates our contender node.
    pub(super) async fn enter(&self, req: &Request<'_>) -> Result<Contender<'_>> {
        self.check_ttl(req.ttl)?;
        let lock = paths::lock_path(&self.root, req.name);
        let uuid = random_uuid();
        let prefix = paths::contender_prefix(&lock, &uuid);
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
                        node: paths::contender_name(&uuid, sequence.into_i64()),
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

    /// The data and stat of `path` (`NoNode` and the like as the inner
    /// error).
    pub(super) async fn data(&self, path: &str) -> Result<ZkResult<(Vec<u8>, zk::Stat)>> {
        self.ask(true, |c| c.get_data(path)).await
    }

    /// The children of `path`; `None` when it does not exist.
    pub(super) async fn children(&self, path: &str) -> Result<Option<Vec<String>>> {
        match self
            .ask(true, |c| async move { c.list_children(path).await })
            .await?
        {
            Ok(children) => Ok(Some(children)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The contender just before ours, or `None` when ours is first.
    /// `Err(Gone)` is reported as `Ok(Err(()))`: our node no longer exists.
    pub(super) async fn predecessor(
        &self,
        contender: &Contender<'_>,
    ) -> Result<std::result::Result<Option<String>, ()>> {
        let line = paths::in_line(self.children(&contender.lock).await?.unwrap_or_default());
        Ok(match line.iter().position(|c| *c == contender.node) {
            None => Err(()),
            Some(0) => Ok(None),
            Some(i) => Ok(Some(line[i - 1].clone())),
        })
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

    /// The server's clock, in ms since the epoch: the `mtime` of a write.
    pub(super) async fn server_millis(&self) -> Result<i64> {
        let clock = format!("{}/{}", self.root, paths::CLOCK);
        for _ in 0..3 {
            match self
                .ask(true, |c| {
                    let clock = clock.clone();
                    async move { c.set_data(&clock, b"", None).await }
                })
                .await?
            {
                Ok(stat) => return Ok(stat.mtime),
                Err(zk::Error::NoNode) => {
                    self.make_parents(&self.root).await?;
                    let opts = self.options(CreateMode::Persistent);
                    match self
                        .ask(true, |c| {
                            let (clock, opts) = (clock.clone(), opts.clone());
                            async move { c.create(&clock, b"", &opts).await }
                        })
                        .await?
                    {
                        Ok((stat, _)) => return Ok(stat.mtime),
                        Err(zk::Error::NodeExists) => {}
                        Err(e) => return Err(self.fail(e)),
                    }
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(now_millis())
    }
}

/// Deletes a held lock's node once its TTL passed without renewal.
async fn expire(
    session: Arc<Session>,
    held: Locks,
    key: (Name, OwnerId),
    path: String,
    expiry: Arc<Mutex<Instant>>,
) {
    loop {
        let at = *expiry.lock().unwrap_or_else(|p| p.into_inner());
        tokio::time::sleep_until(at.into()).await;
        if Instant::now() >= *expiry.lock().unwrap_or_else(|p| p.into_inner()) {
            break;
        }
    }
    {
        let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
        if held.get(&key).is_some_and(|h| h.path == path) {
            held.remove(&key);
        }
    }
    delete_until_gone(session, path).await;
}

/// Deletes `path`, retrying through disconnections, until it is gone or
/// the session that created it is (its ephemeral nodes go with it): while
/// that session lives, the node blocks its line. Gives up only after
/// [`ABANDON_LIMIT`] (an ensemble gone for good).
async fn delete_until_gone(session: Arc<Session>, path: String) {
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

#[async_trait]
impl LockBackend for ZookeeperBackend {
    fn max_ttl(&self) -> Option<Duration> {
        Some(self.session.timeout())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            fifo: true,
            pushed_wakeups: true,
            server_detects_loss: true,
            // The TTL is timed by the holder's host; the session by the
            // server.
            server_clock: false,
            expires: true,
            durable: true,
            cross_process: true,
            cross_host: true,
        }
    }

    fn address(&self) -> String {
        self.address.clone()
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

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let lock = paths::lock_path(&self.root, name);
        let line = paths::in_line(self.children(&lock).await?.unwrap_or_default());
        let Some(first) = line.first() else {
            return Ok(None);
        };
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
        let (owner, holder) = match owner {
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
            holder,
            fence: Some(stat.czxid as u64),
            expires_in,
            waiters: Some(line.len() - 1),
        }))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let names: Vec<Name> = self
            .children(&self.root)
            .await?
            .unwrap_or_default()
            .iter()
            .filter_map(|c| paths::unescape(c))
            .filter(|n| n.starts_with(prefix))
            .filter_map(|n| Name::new(n).ok())
            .collect();
        crate::backend::inspect_each(self, names).await
    }
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
