//! How the ZooKeeper backend asks the ensemble: each request bounded in
//! time and re-sent over a lost connection when it may be, its errors as
//! lockward's, and the reads and writes the lock seam and records share
//! (parents, data, children, the server's clock).

use std::future::Future;
use std::time::Instant;

use zookeeper_client as zk;
use zookeeper_client::{Client, CreateMode, CreateOptions};

use super::core::{now_millis, ZkResult, ZookeeperBackend, CALL_TIMEOUT, RETRY_PAUSE};
use super::paths;
use super::session::unavailable;
use crate::error::{Error, Result};

impl ZookeeperBackend {
    /// `e` as lockward's error, naming this store.
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
                        cause: None,
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
