//! The etcd store: its client, and the lock seam in the layout of `concurrency.Mutex`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, PutOptions, SortOrder,
    SortTarget, Txn, TxnOp, TxnOpResponse, WatchOptions,
};

use super::keys;
use crate::backend::{Attempt, Capabilities, Grant, LockBackend, Request};
use crate::error::{Error, Result};
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;
use crate::url::{EtcdUrl, StoreUrl};

/// Bound on each unary call (a paused or partitioned member).
const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// A waiter re-checks at least this often even while its watch is quiet,
/// in case the watch's member died (the delete would then never arrive).
const WATCH_SAFETY_NET: Duration = Duration::from_secs(1);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The etcd backend.
pub struct EtcdBackend {
    pub(super) address: String,
    pub(super) prefix: String,
    /// One client per member; `current` is the one in use.
    pub(super) clients: Vec<Client>,
    pub(super) current: AtomicUsize,
    /// The lease of each lock this store holds: only the holder knows it.
    pub(super) leases: Mutex<HashMap<(Name, OwnerId), Held>>,
}

#[derive(Debug, Clone)]
pub(super) struct Held {
    lease: i64,
    key: String,
    /// The TTL the lease was granted with: a keep-alive renews to it.
    ttl_secs: i64,
}

/// The value of a contender key: the label (an election proposal) when
/// there is one, else the owner id.
fn contender_value(req: &Request<'_>) -> String {
    match req.label {
        Some(label) => label.to_string(),
        None => req.owner.to_string(),
    }
}

/// A contender key whose lease must be revoked unless we end up holding it:
/// revoked on drop (a cancelled or timed-out wait), kept by `keep()`.
pub(super) struct Contender<'a> {
    backend: &'a EtcdBackend,
    lease: i64,
    key: String,
    revision: i64,
    /// When the lease's TTL last started counting: its grant, or the send
    /// time of the last keep-alive the server acknowledged.
    refreshed: Arc<Mutex<Instant>>,
    keepalive: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Contender<'_> {
    fn drop(&mut self) {
        if let Some(task) = self.keepalive.take() {
            task.abort();
        }
        if self.lease != 0 {
            let mut client = self.backend.client();
            let lease = self.lease;
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = client.lease_revoke(lease).await;
                });
            }
        }
    }
}

impl Contender<'_> {
    /// Whether the lease is surely alive: within `ttl` of its last refresh.
    fn lease_alive(&self, ttl: Duration) -> bool {
        let refreshed = *self.refreshed.lock().unwrap_or_else(|p| p.into_inner());
        Instant::now() < refreshed + ttl
    }

    /// We hold the lock: stop the waiting keep-alive, keep the lease.
    fn keep(mut self, ttl: Duration) -> Held {
        if let Some(task) = self.keepalive.take() {
            task.abort();
        }
        let held = Held {
            lease: self.lease,
            key: std::mem::take(&mut self.key),
            ttl_secs: lease_seconds(ttl),
        };
        self.lease = 0;
        held
    }
}

/// How a wait for the predecessor ended.
pub(super) enum Wait {
    /// The key of this create revision, just before ours, was deleted.
    Deleted(i64),
    /// No key before ours.
    NoneBefore,
    /// Look again (safety net, broken or cancelled watch).
    Recheck,
    /// The caller's deadline passed.
    TimedOut,
}

/// A contender's standing in its line.
pub(super) enum Place {
    First,
    Behind,
    Gone,
}

/// etcd counts lease TTLs in whole seconds.
fn lease_seconds(ttl: Duration) -> i64 {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(secs.max(1)).unwrap_or(i64::MAX)
}

/// `options` with the credentials of `url`, and its TLS settings for
/// `etcds://` (refused when lockward was built without `etcd-tls`).
fn with_identity(
    mut options: ConnectOptions,
    url: &EtcdUrl,
    address: &str,
) -> Result<ConnectOptions> {
    if url.tls && !cfg!(feature = "etcd-tls") {
        return Err(Error::Unsupported {
            scheme: "etcds".into(),
            why: "TLS to etcd needs lockward's `etcd-tls` cargo feature".into(),
        });
    }
    if let (Some(user), Some(password)) = (&url.user, &url.password) {
        options = options.with_user(user.clone(), password.expose().to_string());
    }
    #[cfg(feature = "etcd-tls")]
    if url.tls {
        options = options.with_tls(tls_options(url, address)?);
    }
    #[cfg(not(feature = "etcd-tls"))]
    let _ = address;
    Ok(options)
}

/// Each endpoint of `url` with its scheme, as the client takes it.
fn endpoint_urls(url: &EtcdUrl) -> Vec<String> {
    let scheme = if url.tls { "https" } else { "http" };
    url.endpoints
        .iter()
        .map(|e| format!("{scheme}://{e}"))
        .collect()
}

/// A plain client on every endpoint of `url`, with its credentials (and
/// TLS), for one-off calls beside the store: the doctor's checks and the
/// bench's floor and memory readings.
pub(crate) async fn side_client(url: &EtcdUrl) -> Result<Client> {
    let address = StoreUrl::Etcd(url.clone()).to_string();
    let options = ConnectOptions::new()
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout(CONNECT_TIMEOUT);
    let options = with_identity(options, url, &address)?;
    Client::connect(endpoint_urls(url), Some(options))
        .await
        .map_err(|e| unavailable(&address, e))
}

impl EtcdBackend {
    /// Connects to the cluster of `url`.
    pub async fn connect(url: &EtcdUrl) -> Result<Self> {
        let address = StoreUrl::Etcd(url.clone()).to_string();
        let options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_require_leader(true)
            // Notice a dead member within about two seconds.
            .with_keep_alive(Duration::from_secs(1), Duration::from_secs(1))
            .with_keep_alive_while_idle(true);
        let options = with_identity(options, url, &address)?;
        let mut clients = Vec::new();
        for endpoint in endpoint_urls(url) {
            let connect = Client::connect([endpoint], Some(options.clone()));
            match tokio::time::timeout(CONNECT_TIMEOUT * 2, connect).await {
                Ok(Ok(client)) => clients.push(client),
                Ok(Err(e)) => return Err(unavailable(&address, e)),
                Err(_) => {
                    return Err(Error::Unavailable {
                        address,
                        message: format!("no answer within {:?}", CONNECT_TIMEOUT * 2),
                    })
                }
            }
        }
        let backend = EtcdBackend {
            address,
            prefix: url.prefix.clone(),
            clients,
            current: AtomicUsize::new(0),
            leases: Mutex::new(HashMap::new()),
        };
        // A round trip now, so a cluster that is down fails here, clearly.
        backend
            .call(|mut c| async move { c.get("lockward-ping", None).await })
            .await?;
        Ok(backend)
    }

    /// The client of the member in use.
    pub(super) fn client(&self) -> Client {
        self.clients[self.current.load(Ordering::Relaxed) % self.clients.len()].clone()
    }

    /// Runs one unary call with a timeout, on the member in use, moving on
    /// to the next member when it cannot be reached. Every call lockward
    /// makes is safe to repeat (the put is conditional on absence; a lease
    /// granted twice just expires).
    pub(super) async fn call<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn(Client) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let mut last = None;
        for _ in 0..self.clients.len() {
            let at = self.current.load(Ordering::Relaxed);
            let client = self.clients[at % self.clients.len()].clone();
            let error = match tokio::time::timeout(CALL_TIMEOUT, op(client)).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if !unreachable(&e) => return Err(unavailable(&self.address, e)),
                Ok(Err(e)) => unavailable(&self.address, e),
                Err(_) => Error::Unavailable {
                    address: self.address.clone(),
                    message: format!("no answer within {CALL_TIMEOUT:?}"),
                },
            };
            // Move on, unless another call moved on already.
            let _ = self
                .current
                .compare_exchange(at, at + 1, Ordering::Relaxed, Ordering::Relaxed);
            last = Some(error);
        }
        Err(last.unwrap_or_else(|| Error::Unavailable {
            address: self.address.clone(),
            message: "no members".into(),
        }))
    }

    pub(super) fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<(Name, OwnerId), Held>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Grants a lease and puts our contender key if absent; returns it with
    /// the create revision of the first key in the line (the holder's).
    pub(super) async fn enter(&self, req: &Request<'_>) -> Result<(Contender<'_>, i64)> {
        let prefix = keys::lock_prefix(&self.prefix, req.name);
        let granted_from = Instant::now();
        let lease = self.grant(req.ttl).await?;
        let key = keys::contender_key(&prefix, lease);
        let mut contender = Contender {
            backend: self,
            lease,
            key: key.clone(),
            revision: 0,
            refreshed: Arc::new(Mutex::new(granted_from)),
            keepalive: None,
        };
        let value = contender_value(req);
        let first = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(
                    key.clone(),
                    value,
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::get(prefix.clone(), Some(first.clone())),
            ])
            .or_else([
                TxnOp::get(key.clone(), None),
                TxnOp::get(prefix.clone(), Some(first)),
            ]);
        let resp = self
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        let responses = resp.op_responses();
        contender.revision = if resp.succeeded() {
            resp.header().map(|h| h.revision()).unwrap_or(0)
        } else {
            match responses.first() {
                Some(TxnOpResponse::Get(g)) => {
                    g.kvs().first().map(|kv| kv.create_revision()).unwrap_or(0)
                }
                _ => 0,
            }
        };
        let holder_revision = match responses.get(1) {
            Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| kv.create_revision()),
            _ => None,
        };
        if contender.revision <= 0 {
            return Err(self.protocol("the contender key was not created"));
        }
        let first = holder_revision.unwrap_or(contender.revision);
        Ok((contender, first))
    }

    /// A new lease of ⌈`ttl`⌉ seconds.
    pub(super) async fn grant(&self, ttl: Duration) -> Result<i64> {
        let secs = lease_seconds(ttl);
        Ok(self
            .call(|mut c| async move { c.lease_grant(secs, None).await })
            .await?
            .id())
    }

    pub(super) fn protocol(&self, message: &str) -> Error {
        Error::Protocol {
            address: self.address.clone(),
            message: message.to_string(),
        }
    }

    /// Keeps the contender's lease alive every `every` until aborted,
    /// recording each acknowledged refresh.
    pub(super) fn keep_alive_while_waiting(
        &self,
        contender: &Contender<'_>,
        every: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let mut client = self.client();
        let lease = contender.lease;
        let refreshed = contender.refreshed.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let sent = Instant::now();
                if let Ok((mut keeper, mut stream)) = client.lease_keep_alive(lease).await {
                    let _ = keeper.keep_alive().await;
                    if let Ok(Some(r)) = stream.message().await {
                        if r.ttl() > 0 {
                            *refreshed.lock().unwrap_or_else(|p| p.into_inner()) = sent;
                        }
                    }
                }
            }
        })
    }

    /// Waits until the key created just before ours is deleted (or a second
    /// passed, as a safety net), or the deadline passes.
    pub(super) async fn wait_for_predecessor(
        &self,
        prefix: &str,
        revision: i64,
        deadline: Option<Instant>,
    ) -> Result<Wait> {
        let before = GetOptions::new()
            .with_prefix()
            .with_max_create_revision(revision - 1)
            .with_sort(SortTarget::Create, SortOrder::Descend)
            .with_limit(1);
        let resp = self
            .call(|mut c| {
                let (key, opts) = (prefix.to_string(), before.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let Some(predecessor) = resp.kvs().first() else {
            return Ok(Wait::NoneBefore);
        };
        let pred_key = predecessor.key().to_vec();
        let pred_revision = predecessor.create_revision();
        // Watch from just after our read, so a delete in between is seen.
        let from = resp.header().map(|h| h.revision() + 1).unwrap_or(0);
        let mut client = self.client();
        let watch = async {
            let mut stream = client
                .watch(
                    pred_key,
                    Some(WatchOptions::new().with_start_revision(from)),
                )
                .await?;
            while let Some(msg) = stream.message().await? {
                if msg.canceled() {
                    return Ok(false);
                }
                if msg
                    .events()
                    .iter()
                    .any(|e| e.event_type() == EventType::Delete)
                {
                    return Ok(true);
                }
            }
            Ok::<bool, etcd_client::Error>(false)
        };
        let net = Instant::now() + WATCH_SAFETY_NET;
        let wake = deadline.map_or(net, |d| d.min(net));
        match tokio::time::timeout_at(wake.into(), watch).await {
            Ok(Ok(true)) => Ok(Wait::Deleted(pred_revision)),
            Ok(Ok(false)) => Ok(Wait::Recheck),
            // A broken watch (restart, failover) just means: look again.
            Ok(Err(e)) => {
                tracing::debug!(address = %self.address, error = %e, "watch ended; re-checking");
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(Wait::Recheck)
            }
            Err(_) if deadline.is_some_and(|d| Instant::now() >= d) => Ok(Wait::TimedOut),
            Err(_) => Ok(Wait::Recheck),
        }
    }

    /// Where the key of create revision `revision` stands in its line, and
    /// the first key's create revision.
    pub(super) async fn place(&self, prefix: &str, revision: i64) -> Result<(Place, i64)> {
        let first = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1);
        let resp = self
            .call(|mut c| {
                let (key, opts) = (prefix.to_string(), first.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let first = resp.kvs().first().map(|kv| kv.create_revision());
        Ok(match first {
            Some(first) if first == revision => (Place::First, first),
            Some(first) if first < revision => (Place::Behind, first),
            // Nothing before us, yet not us: our key (and lease) is gone.
            _ => (Place::Gone, 0),
        })
    }

    /// One keep-alive; `false` when the lease is gone.
    pub(super) async fn keep_alive_once(&self, lease: i64) -> Result<bool> {
        self.call(|mut c| async move {
            let (mut keeper, mut stream) = c.lease_keep_alive(lease).await?;
            keeper.keep_alive().await?;
            Ok(stream
                .message()
                .await?
                .map(|r| r.ttl() > 0)
                .unwrap_or(false))
        })
        .await
    }
}

/// The TLS settings of an `etcds://` URL: its `ca=` roots, else the
/// system's.
#[cfg(feature = "etcd-tls")]
fn tls_options(url: &EtcdUrl, address: &str) -> Result<etcd_client::TlsOptions> {
    let mut tls = etcd_client::TlsOptions::new();
    match &url.ca {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| Error::Unavailable {
                address: address.to_string(),
                message: format!("cannot read the CA file {}: {e}", path.display()),
            })?;
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(pem));
        }
        None => tls = tls.with_native_roots(),
    }
    Ok(tls)
}

/// Whether `e` says the member could not be reached or has no leader (try
/// another), rather than that the request itself was refused.
fn unreachable(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(s) => matches!(
            s.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown
        ),
        _ => false,
    }
}

fn unavailable(address: &str, e: etcd_client::Error) -> Error {
    let message = match &e {
        etcd_client::Error::GRpcStatus(s)
            if s.code() == tonic::Code::InvalidArgument
                && s.message().contains("authentication") =>
        {
            "authentication failed: check the user and password in the URL".to_string()
        }
        etcd_client::Error::GRpcStatus(s) => format!("{}: {}", s.code(), s.message()),
        other => other.to_string(),
    };
    Error::Unavailable {
        address: address.to_string(),
        message,
    }
}

#[async_trait]
impl LockBackend for EtcdBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            fifo: true,
            pushed_wakeups: true,
            server_detects_loss: false,
            server_clock: true,
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
        let (contender, first) = self.enter(req).await?;
        if first != contender.revision {
            // Go's TryLock: leave the line at once (the drop revokes).
            return Ok(Attempt::Held { expires_in: None });
        }
        let fence = contender.revision as u64;
        let held = contender.keep(req.ttl);
        self.leases().insert((req.name.clone(), req.owner), held);
        Ok(Attempt::Granted { fence })
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        let prefix = keys::lock_prefix(&self.prefix, req.name);
        let contender = 'line: loop {
            let (mut contender, mut first) = self.enter(req).await?;
            if first == contender.revision {
                break contender;
            }
            contender.keepalive = Some(self.keep_alive_while_waiting(&contender, req.ttl / 3));
            loop {
                match self
                    .wait_for_predecessor(&prefix, contender.revision, deadline)
                    .await?
                {
                    Wait::TimedOut => return Ok(None),
                    // Keys only join a line behind us and leave it: once the
                    // first key is gone, none is left before ours, and ours
                    // still exists while its lease is within its TTL.
                    Wait::Deleted(revision)
                        if revision == first && contender.lease_alive(req.ttl) =>
                    {
                        break 'line contender
                    }
                    Wait::Deleted(_) | Wait::NoneBefore | Wait::Recheck => {}
                }
                let (place, now_first) = self.place(&prefix, contender.revision).await?;
                first = now_first;
                match place {
                    Place::First => break 'line contender,
                    Place::Behind => {}
                    // Our lease lapsed while we waited (keep-alives failed):
                    // join the line again with a new one.
                    Place::Gone => continue 'line,
                }
            }
        };
        // The lease aged while we waited: the local deadline counts from its
        // last acknowledged refresh, which the keep-alive kept within TTL/3.
        let granted_at = *contender
            .refreshed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let fence = contender.revision as u64;
        let held = contender.keep(req.ttl);
        self.leases().insert((req.name.clone(), req.owner), held);
        Ok(Some(Grant {
            fence,
            started: granted_at,
        }))
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let Some(held) = self.leases().get(&(name.clone(), owner)).cloned() else {
            return Err(not_owner());
        };
        // A keep-alive renews the lease to the TTL it was granted with; a
        // longer one would give the holder a deadline past the server's.
        if lease_seconds(ttl) > held.ttl_secs {
            return Err(Error::InvalidArgument {
                what: "ttl",
                why: format!(
                    "an etcd lease keeps the TTL it was granted with ({} s); take the lock with the longer TTL instead",
                    held.ttl_secs
                ),
            });
        }
        let alive = self.keep_alive_once(held.lease).await?;
        let key = held.key.clone();
        let exists = alive
            && self
                .call(|mut c| {
                    let key = key.clone();
                    async move { c.get(key, Some(GetOptions::new().with_count_only())).await }
                })
                .await?
                .count()
                > 0;
        if exists {
            Ok(())
        } else {
            self.leases().remove(&(name.clone(), owner));
            Err(not_owner())
        }
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let Some(held) = self.leases().remove(&(name.clone(), owner)) else {
            return Err(Error::NotOwner {
                name: name.to_string(),
            });
        };
        let lease = held.lease;
        let revoked = self
            .call(|mut c| async move {
                match c.lease_revoke(lease).await {
                    Ok(_) => Ok(true),
                    Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound => {
                        Ok(false)
                    }
                    Err(e) => Err(e),
                }
            })
            .await?;
        if revoked {
            Ok(())
        } else {
            Err(Error::NotOwner {
                name: name.to_string(),
            })
        }
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let prefix = keys::lock_prefix(&self.prefix, name);
        let opts = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend);
        let resp = self
            .call(|mut c| {
                let (key, opts) = (prefix.clone(), opts.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let Some(first) = resp.kvs().first() else {
            return Ok(None);
        };
        let value = String::from_utf8_lossy(first.value()).into_owned();
        let lease = first.lease();
        // Our own holders are known by lease; others by what they stored.
        let ours = self
            .leases()
            .iter()
            .find(|(_, held)| held.lease == lease)
            .map(|((_, owner), _)| owner.to_string());
        let (owner, label) = match (ours, OwnerId::from_hex(&value)) {
            (Some(owner), None) => (owner, Some(value)),
            (Some(owner), Some(_)) => (owner, None),
            (None, Some(_)) => (value, None),
            (None, None) => (
                format!("lease {lease:x}"),
                Some(value).filter(|v| !v.is_empty()),
            ),
        };
        let ttl = self
            .call(|mut c| async move { c.lease_time_to_live(lease, None).await })
            .await
            .ok()
            .map(|r| r.ttl())
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs);
        Ok(Some(LockInfo {
            name: name.to_string(),
            owner: if owner.is_empty() {
                "(etcdctl)".into()
            } else {
                owner
            },
            holder: label,
            fence: u64::try_from(first.create_revision()).ok(),
            expires_in: ttl,
            waiters: Some(resp.kvs().len() - 1),
        }))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let range = format!("{}{}", self.prefix, keys::escape(prefix));
        let opts = GetOptions::new().with_prefix().with_keys_only();
        let resp = self
            .call(|mut c| {
                let (key, opts) = (range.clone(), opts.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let names: Vec<Name> = resp
            .kvs()
            .iter()
            .filter_map(|kv| std::str::from_utf8(kv.key()).ok())
            .filter_map(|k| keys::name_of(&self.prefix, k))
            .filter_map(|n| Name::new(n).ok())
            .collect();
        crate::backend::inspect_each(self, names).await
    }
}
