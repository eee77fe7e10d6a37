//! The Redlock store: N masters, and the lock seam with the quorum fence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::future::join_all;
use redis::{Script, Value};

use super::url::RedlockUrl;
use crate::backend::redis::channels::Channels;
use crate::backend::redis::codec::{int, redis_error, text};
use crate::backend::redis::conn::Conn;
use crate::backend::redis::keys;
use crate::backend::redis::lua::script;
use crate::backend::time::ttl_millis;
use crate::backend::{Attempt, Capabilities, Grant, LockBackend, Request, Subscription};
use crate::error::{Error, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// One master: its commands connection and its pub/sub side.
pub(super) struct Master {
    pub(super) address: String,
    pub(super) conn: Conn,
    pub(super) channels: Arc<Channels>,
}

/// The Redlock backend.
pub struct RedlockBackend {
    pub(super) address: String,
    pub(super) prefix: String,
    pub(super) masters: Vec<Master>,
    pub(super) quorum: usize,
    pub(super) grant: Script,
    pub(super) raise: Script,
    pub(super) release: Script,
    pub(super) extend: Script,
    pub(super) hold_back: Script,
    pub(super) inspect: Script,
    pub(super) leave: Script,
    pub(super) write_versioned: Script,
}

/// An acquisition attempt in flight: if it is dropped before it finishes,
/// its keys are released on every master in the background.
pub(super) struct Abandoned {
    pub(super) conns: Vec<Conn>,
    pub(super) release: Script,
    pub(super) keys: keys::Keys,
    pub(super) owner: String,
    pub(super) armed: bool,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (conns, release, k, owner) = (
            std::mem::take(&mut self.conns),
            self.release.clone(),
            self.keys.clone(),
            std::mem::take(&mut self.owner),
        );
        runtime.spawn(async move {
            for conn in conns {
                let mut call = release.key(&k.lock);
                call.key(&k.channel)
                    .key(&k.holder)
                    .key(&k.queue)
                    .key(&k.places)
                    .arg(&owner);
                let _ =
                    tokio::time::timeout(NODE_TIMEOUT, call.invoke_async::<i64>(&mut conn.clone()))
                        .await;
            }
        });
    }
}

/// What one master said in round one.
pub(super) enum Vote {
    Granted(u64),
    Held(Option<Duration>),
    Failed(String),
}

/// Per-node timeout of operations that carry no TTL (release, inspect).
pub(super) const NODE_TIMEOUT: Duration = Duration::from_millis(250);

/// The per-node timeout: short against the TTL, so one slow or paused
/// master cannot eat the validity.
pub(super) fn node_timeout(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(20), Duration::from_millis(250))
}

impl RedlockBackend {
    /// Connects to every master. Masters that are down are connected to
    /// lazily; the store opens when a majority answers.
    ///
    /// Cancellation: dropping the future drops the connection attempts.
    pub async fn connect(url: &RedlockUrl) -> Result<Self> {
        let address = url.to_string();
        let mut masters = Vec::new();
        for endpoint in &url.masters {
            let master_url = url.master(endpoint);
            let conn = Conn::connect(&master_url, None, true)
                .await
                .map_err(|e| redis_error(&address, e))?;
            masters.push(Master {
                address: endpoint.to_string(),
                conn,
                channels: Channels::new(master_url),
            });
        }
        let quorum = masters.len() / 2 + 1;
        let backend = RedlockBackend {
            address,
            prefix: url.prefix.clone(),
            masters,
            quorum,
            grant: script("redlock_grant"),
            raise: script("redlock_raise"),
            release: script("release"),
            extend: script("extend"),
            hold_back: script("hold_back"),
            inspect: script("inspect"),
            leave: script("leave"),
            write_versioned: script("redlock_write_versioned"),
        };
        let pings = backend
            .on_all(Duration::from_secs(2), |conn| async move {
                redis::cmd("PING")
                    .query_async::<String>(&mut conn.clone())
                    .await
            })
            .await;
        let failures = backend.failures(&pings);
        if failures.len() > backend.masters.len() - backend.quorum {
            return Err(backend.no_quorum(&failures));
        }
        Ok(backend)
    }

    /// Runs `op` on every master in parallel, each bounded by `timeout`.
    pub(super) async fn on_all<'a, T, F, Fut>(
        &'a self,
        timeout: Duration,
        op: F,
    ) -> Vec<std::result::Result<T, String>>
    where
        F: Fn(&'a Conn) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        join_all(self.masters.iter().map(|m| {
            let fut = op(&m.conn);
            async move {
                match tokio::time::timeout(timeout, fut).await {
                    Ok(Ok(v)) => Ok(v),
                    Ok(Err(e)) => Err(format!("{}: {e}", m.address)),
                    Err(_) => Err(format!("{}: no reply within {timeout:?}", m.address)),
                }
            }
        }))
        .await
    }

    pub(super) fn failures<T>(&self, results: &[std::result::Result<T, String>]) -> Vec<String> {
        results
            .iter()
            .filter_map(|r| r.as_ref().err().cloned())
            .collect()
    }

    /// The outcome of an owner-checked step on every master: done when a
    /// majority did it, [`Error::NotOwner`] when too many refused for that.
    fn by_majority(&self, name: &Name, results: &[std::result::Result<i64, String>]) -> Result<()> {
        let done = results.iter().filter(|r| matches!(r, Ok(1))).count();
        let refused = results.iter().filter(|r| matches!(r, Ok(0))).count();
        if done >= self.quorum {
            Ok(())
        } else if refused > self.masters.len() - self.quorum {
            Err(Error::NotOwner {
                name: name.to_string(),
            })
        } else {
            Err(self.no_quorum(&self.failures(results)))
        }
    }

    pub(super) fn no_quorum(&self, failures: &[String]) -> Error {
        Error::Unavailable {
            address: self.address.clone(),
            message: format!(
                "{} of {} masters failed, a majority of {} is needed: {}",
                failures.len(),
                self.masters.len(),
                self.quorum,
                failures.join("; ")
            ),
            cause: None,
        }
    }

    pub(super) fn protocol(&self, message: String) -> Error {
        Error::Protocol {
            address: self.address.clone(),
            message,
            cause: None,
        }
    }

    /// `SET` (with `NX` when `only_new`) of a record on every master; how
    /// many stored it, or an error when a majority could not be reached.
    pub(super) async fn set_record(
        &self,
        key: &Name,
        value: &str,
        ttl: Duration,
        only_new: bool,
    ) -> Result<usize> {
        let record = keys::record_key(&self.prefix, key, false);
        let results = self
            .on_all(NODE_TIMEOUT, |conn| {
                let mut cmd = redis::cmd("SET");
                cmd.arg(&record).arg(value);
                if only_new {
                    cmd.arg("NX");
                }
                cmd.arg("PX").arg(ttl_millis(ttl));
                async move { cmd.query_async::<Option<String>>(&mut conn.clone()).await }
            })
            .await;
        let failed = self.failures(&results);
        if failed.len() > self.masters.len() - self.quorum {
            return Err(self.no_quorum(&failed));
        }
        Ok(results.iter().filter(|r| matches!(r, Ok(Some(_)))).count())
    }
}

/// What RedlockBackend guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: true,
    pushed_wakeups: true,
    server_detects_loss: false,
    server_clock: true,
    expires: true,
    durable: true,
    cross_process: true,
    cross_host: true,
    permanent_records: false,
    native_rw_lock: false,
    native_semaphore: false,
};

#[async_trait]
impl LockBackend for RedlockBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        self.address.clone()
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        self.try_acquire_keys(keys::keys(&self.prefix, req.name, false), req, None)
            .await
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        crate::backend::acquire_in_line(self, req, deadline).await
    }

    async fn subscribe(&self, name: &Name) -> Result<Subscription> {
        let k = keys::keys(&self.prefix, name, false);
        Ok(self.subscribe_everywhere(&k.channel).await)
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let k = keys::keys(&self.prefix, name, false);
        let owner = owner.to_string();
        let ttl_ms = ttl_millis(ttl);
        let results = self
            .on_all(node_timeout(ttl), |conn| {
                let (script, k, owner) = (&self.extend, &k, &owner);
                async move {
                    let mut call = script.key(&k.lock);
                    call.key(&k.holder).arg(owner).arg(ttl_ms);
                    call.invoke_async::<i64>(&mut conn.clone()).await
                }
            })
            .await;
        self.by_majority(name, &results)
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let (released, failed) = self
            .release_everywhere(
                &keys::keys(&self.prefix, name, false),
                &owner.to_string(),
                NODE_TIMEOUT,
            )
            .await;
        if released > 0 {
            Ok(())
        } else if failed.is_empty() {
            Err(Error::NotOwner {
                name: name.to_string(),
            })
        } else {
            Err(self.no_quorum(&failed))
        }
    }

    /// Hands the lock over on every master; done with a majority, as a
    /// grant is.
    async fn force_hold_back(
        &self,
        name: &Name,
        holder: &LockInfo,
        placeholder: OwnerId,
        label: &str,
    ) -> Result<()> {
        let k = keys::keys(&self.prefix, name, false);
        let placeholder = placeholder.to_string();
        let results = self
            .on_all(NODE_TIMEOUT, |conn| {
                let (script, k, placeholder) = (&self.hold_back, &k, &placeholder);
                async move {
                    let mut call = script.key(&k.lock);
                    call.key(&k.holder)
                        .arg(&holder.owner)
                        .arg(placeholder)
                        .arg(label);
                    call.invoke_async::<i64>(&mut conn.clone()).await
                }
            })
            .await;
        self.by_majority(name, &results)
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let k = keys::keys(&self.prefix, name, false);
        let replies = self
            .on_all(NODE_TIMEOUT, |conn| {
                let (script, k) = (&self.inspect, &k);
                async move {
                    let mut call = script.key(&k.lock);
                    call.key(&k.fence).key(&k.holder).key(&k.queue);
                    call.invoke_async::<Vec<Value>>(&mut conn.clone()).await
                }
            })
            .await;
        // (owner, pttl, fence, label) per master that answered with a live key.
        let keys_seen: Vec<(String, Duration, Option<u64>, Option<String>)> = replies
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .filter_map(|reply| {
                let owner = reply.first().and_then(text)?;
                let pttl = u64::try_from(reply.get(1).and_then(int)?).ok()?;
                let fence = reply
                    .get(2)
                    .and_then(int)
                    .and_then(|f| u64::try_from(f).ok());
                let label = reply.get(3).and_then(text);
                Some((owner, Duration::from_millis(pttl), fence, label))
            })
            .collect();
        let holds = |owner: &String| keys_seen.iter().filter(|(o, ..)| o == owner).count();
        let majority_owner: Option<String> = keys_seen
            .iter()
            .map(|(o, ..)| o)
            .find(|o| holds(o) >= self.quorum)
            .cloned();
        let Some(owner) = majority_owner else {
            return Ok(None);
        };
        let mut pttls: Vec<Duration> = keys_seen
            .iter()
            .filter(|(o, ..)| *o == owner)
            .map(|(_, p, ..)| *p)
            .collect();
        pttls.sort_by(|a, b| b.cmp(a));
        let fence = keys_seen
            .iter()
            .filter(|(o, ..)| *o == owner)
            .filter_map(|(_, _, f, _)| *f)
            .max()
            .filter(|_| OwnerId::from_hex(&owner).is_some());
        let label = keys_seen
            .iter()
            .filter(|(o, ..)| *o == owner)
            .find_map(|(.., label)| label.clone());
        Ok(Some(LockInfo {
            name: name.to_string(),
            owner,
            label,
            fence,
            // Held while a majority of its keys live.
            expires_in: pttls.get(self.quorum - 1).copied(),
            waiters: None,
            holding: Holding::Lock,
        }))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let pattern = keys::scan_pattern(&self.prefix, prefix, false);
        let scans = join_all(
            self.masters
                .iter()
                .map(|m| crate::backend::redis::conn::scan_all(&m.conn, &pattern)),
        )
        .await;
        let names: Vec<Name> = scans
            .into_iter()
            .filter_map(|r| r.ok())
            .flatten()
            .filter_map(|k| k.strip_prefix(self.prefix.as_str()).map(str::to_string))
            .filter_map(|k| keys::name_of(&k, false))
            .filter_map(|n| Name::new(n).ok())
            .collect();
        crate::backend::inspect_each(self, names).await
    }
}
