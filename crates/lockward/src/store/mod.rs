//! The store: a connection to one backend, how it opens, and what a caller
//! does with its leases (scoped use, extend, release, inspect, list); taking
//! a lock is in `acquire.rs`, the forced unlock in `force.rs`, records in
//! `records.rs`.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::backend::memory::MemoryBackend;
use crate::backend::{Backend, Capabilities, Hold, LockHold, PermitHold};
use crate::duration::check_ttl;
use crate::error::{Error, Result};
use crate::lease::{local_deadline, Lease, LockInfo};
use crate::local_line::Lines;
use crate::name::Name;
use crate::options::LockOptions;
use crate::renewer::Renewer;

mod acquire;
mod fences_seen;
mod force;
mod records;
use crate::url::StoreUrl;

/// A connection to one backend, opened from a URL. Cheap to clone; share one
/// per process.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// use lockward::{LockOptions, Store};
///
/// let store = Store::open("memory://").await?;
/// let opts = LockOptions::new().ttl(Duration::from_secs(10));
/// let charged = store
///     .with_lock("payment/order-7", &opts, |lease| async move {
///         // Charge once; pass lease.fence to the payment table.
///         lease.fence
///     })
///     .await?;
/// assert!(charged > 0);
/// # Ok::<(), lockward::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct Store {
    backend: Arc<dyn Backend>,
    /// What guards of locks and readers renew and release through.
    lock_hold: Arc<dyn Hold>,
    /// What guards of a native semaphore's holders renew and release
    /// through.
    permit_hold: Arc<dyn Hold>,
    /// Started on the first guard that renews, on that guard's runtime, and
    /// again if that runtime has shut down since.
    renewer: Arc<Mutex<Option<Arc<Renewer>>>>,
    /// Local waiters queue here before waiting on the backend.
    lines: Arc<Lines>,
    /// The URL's scheme, the `store` label of lockward's metrics.
    scheme: &'static str,
    /// The highest fence granted per lock name through this handle and
    /// its clones (a grant not above it is refused: the store went back).
    fences_seen: Arc<fences_seen::FencesSeen>,
}

impl Store {
    /// Opens the store a URL names (see [`StoreUrl`]).
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn open(url: &str) -> Result<Store> {
        Store::connect(&StoreUrl::parse(url)?).await
    }

    /// Opens the store of a parsed URL.
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &StoreUrl) -> Result<Store> {
        let store = Store::connect_backend(url).await?;
        Ok(Store {
            scheme: url.scheme(),
            ..store
        })
    }

    async fn connect_backend(url: &StoreUrl) -> Result<Store> {
        match url {
            StoreUrl::Memory => Ok(Store::memory()),
            #[cfg(feature = "sqlite")]
            StoreUrl::Sqlite { path } => Ok(Store::from_backend(
                crate::backend::sqlite::SqliteBackend::open(path).await?,
            )),
            #[cfg(feature = "redis")]
            StoreUrl::Redis(redis) => Ok(Store::from_backend(
                crate::backend::redis::RedisBackend::connect(redis).await?,
            )),
            #[cfg(feature = "redis")]
            StoreUrl::Redlock(redlock) => Ok(Store::from_backend(
                crate::backend::redlock::RedlockBackend::connect(redlock).await?,
            )),
            #[cfg(feature = "etcd")]
            StoreUrl::Etcd(etcd) => Ok(Store::from_backend(
                crate::backend::etcd::EtcdBackend::connect(etcd).await?,
            )),
            #[cfg(feature = "zookeeper")]
            StoreUrl::Zookeeper(zk) => Ok(Store::from_backend(
                crate::backend::zookeeper::ZookeeperBackend::connect(zk).await?,
            )),
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(pg) => Ok(Store::from_shared(
                crate::backend::postgres::connect(pg).await?,
            )),
            #[cfg(feature = "mysql")]
            StoreUrl::Mysql(mysql) => Ok(Store::from_shared(
                crate::backend::mysql::connect(mysql).await?,
            )),
            #[cfg(feature = "kubernetes")]
            StoreUrl::Kubernetes(k8s) => Ok(Store::from_backend(
                crate::backend::kubernetes::KubernetesBackend::connect(k8s).await?,
            )),
            #[allow(unreachable_patterns)]
            other => Err(Error::NotBuilt {
                scheme: other.scheme().to_string(),
                why: format!(
                    "rebuild lockward with the cargo feature for {}",
                    other.scheme()
                ),
            }),
        }
    }

    /// A fresh in-process store.
    pub fn memory() -> Store {
        Store::from_backend(MemoryBackend::new())
    }

    /// Wraps a backend of your own.
    pub fn from_backend(backend: impl Backend) -> Store {
        Store::from_shared(Arc::new(backend))
    }

    /// Wraps a shared backend.
    pub fn from_shared(backend: Arc<dyn Backend>) -> Store {
        Store {
            lock_hold: Arc::new(LockHold(backend.clone())),
            permit_hold: Arc::new(PermitHold(backend.clone())),
            backend,
            renewer: Arc::default(),
            lines: Arc::default(),
            scheme: "custom",
            fences_seen: Arc::default(),
        }
    }

    /// What the backend guarantees.
    pub fn capabilities(&self) -> Capabilities {
        self.backend.capabilities()
    }

    /// The longest TTL this store accepts, when it bounds it: on ZooKeeper
    /// the session timeout the servers granted (a lock cannot outlive its
    /// session); `None` elsewhere.
    pub fn max_ttl(&self) -> Option<Duration> {
        self.backend.max_ttl()
    }

    /// The store's address, password redacted.
    pub fn address(&self) -> String {
        self.backend.address()
    }

    /// The backend, for recipes built on the raw trait.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Runs `work` while holding the lock, renewing it (unless the options
    /// turn renewal off). When the lock is lost, `work` is cancelled (its
    /// future dropped) and [`Error::Lost`] returned, so nothing runs on
    /// after the lease ended. The lock is released when `work` ends.
    ///
    /// Cancellation: dropping the future drops `work` and releases the lock in
    /// the background.
    pub async fn with_lock<T, F, Fut>(
        &self,
        name: impl AsRef<str>,
        opts: &LockOptions,
        work: F,
    ) -> Result<T>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.acquire(name, opts).await?;
        let mut lost = guard.lost_signal();
        let output = tokio::select! {
            biased;
            reason = lost.wait() => {
                return Err(Error::Lost { name: guard.name().to_string(), reason });
            }
            output = work(guard.lease()) => output,
        };
        // The work finished while the lease was valid; a failed release only
        // leaves the lock to expire, so it must not discard the result.
        let name = guard.name().clone();
        if let Err(e) = guard.release().await {
            tracing::warn!(%name, error = %e, "release after with_lock failed; the TTL will free it");
        }
        Ok(output)
    }

    /// Extends a lease by hand, for leases not held by a [`Guard`] in this
    /// process. [`Error::NotOwner`] when `lease` is not the live holder.
    ///
    /// Cancellation: the extension may or may not have reached the store; the
    /// lease returned is the only one to trust.
    pub async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let ttl = check_ttl(ttl)?;
        let started = Instant::now();
        self.backend.extend(&lease.name, lease.owner, ttl).await?;
        Ok(Lease {
            ttl,
            deadline: local_deadline(started, ttl),
            ..lease.clone()
        })
    }

    /// Releases a lease by hand. [`Error::NotOwner`] when `lease` is not the
    /// live holder.
    ///
    /// Cancellation: the release may or may not have reached the store; an
    /// unreleased lease runs out at its TTL.
    pub async fn release(&self, lease: &Lease) -> Result<()> {
        self.backend.release(&lease.name, lease.owner).await
    }

    /// The current holder of `name`, if any. Where the store keeps
    /// semaphores natively, `SEMAPHORE#permit/ID` (a row of
    /// [`list`](Store::list)) names one holder of a semaphore.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn inspect(&self, name: impl AsRef<str>) -> Result<Option<LockInfo>> {
        let name = Name::new(name.as_ref())?;
        if let Some(row) = self.permit_holder(&name).await? {
            return Ok(Some(row));
        }
        self.backend.inspect(&name).await
    }

    /// The semaphore holder that `name` names as a row of `list`, where the
    /// store keeps semaphores natively.
    pub(crate) async fn permit_holder(&self, name: &Name) -> Result<Option<LockInfo>> {
        let Some(permits) = self.backend.permits() else {
            return Ok(None);
        };
        let Some((semaphore, _)) = crate::backend::split_holder_row(name.as_str()) else {
            return Ok(None);
        };
        Ok(permits
            .list_permits(semaphore)
            .await?
            .into_iter()
            .find(|row| row.name == name.as_str()))
    }

    /// Every held lock whose name starts with `prefix` (all with `""`),
    /// and, where the store keeps semaphores natively, a row per holder of
    /// the semaphores whose name starts with it (see
    /// [`holder_row`](crate::backend::holder_row)); sorted by name.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let mut held = self.backend.list(prefix).await?;
        if let Some(permits) = self.backend.permits() {
            // A prefix may reach into the rows (`SEM#permit/…`): ask for
            // the semaphores it could start, keep the rows it does start.
            let semaphores = prefix.split('#').next().unwrap_or_default();
            let rows = permits.list_permits(semaphores).await?;
            held.extend(rows.into_iter().filter(|r| r.name.starts_with(prefix)));
            held.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Ok(held)
    }
}
