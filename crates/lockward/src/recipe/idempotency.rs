//! Idempotency keys: run an operation at most once per key, and hand later
//! duplicates the stored result instead of running it again.
//!
//! For key `K`, the operation runs under the lock `idem/K` and its result
//! is stored as the record `idem/K` (see [`Backend::put_record`]):
//!
//! - a duplicate that arrives while the first still runs gets
//!   [`Idempotent::InProgress`] (it does not wait, as a payment API answers
//!   "409 in progress");
//! - a duplicate that arrives later gets [`Idempotent::Stored`] with the
//!   first result, without running anything;
//! - a run that fails stores nothing, so the key stays free for a retry.
//!
//! The record is kept for the retention given (a TTL on Redis, etcd and
//! ZooKeeper; an expiry column on the SQL stores).
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use lockward::recipe::{Idempotency, Idempotent};
//! let keys = Idempotency::new(lockward::Store::memory());
//! let charge = || async { Ok::<_, std::io::Error>("charged 42.00".to_string()) };
//! let first = keys.run("order-17", charge).await?;
//! assert!(matches!(first, Idempotent::Ran(ref r) if r == "charged 42.00"));
//! let again = keys.run("order-17", charge).await?;
//! assert!(matches!(again, Idempotent::Stored(ref r) if r == "charged 42.00"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! [`Backend::put_record`]: crate::backend::Backend::put_record

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::name::Name;
use crate::options::LockOptions;
use crate::store::Store;

/// How long results are kept unless [`Idempotency::retention`] says
/// otherwise.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Runs operations once per key on one store.
#[derive(Debug, Clone)]
pub struct Idempotency {
    store: Store,
    retention: Duration,
    lock: LockOptions,
}

/// What [`Idempotency::run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idempotent {
    /// This call ran the operation; its result is stored.
    Ran(String),
    /// The operation ran before; this is its stored result.
    Stored(String),
    /// Another caller is running it right now.
    InProgress,
}

/// Why [`Idempotency::run`] failed.
#[derive(Debug, thiserror::Error)]
pub enum IdempotencyError<E> {
    /// The operation itself failed; nothing was stored.
    #[error("the operation failed: {0}")]
    Operation(E),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] Error),
}

impl Idempotency {
    /// Idempotency keys on `store`, keeping results for a day.
    pub fn new(store: Store) -> Idempotency {
        Idempotency {
            store,
            retention: DEFAULT_RETENTION,
            lock: LockOptions::new(),
        }
    }

    /// Keeps results for `retention`.
    pub fn retention(mut self, retention: Duration) -> Idempotency {
        self.retention = retention;
        self
    }

    /// The options of the lock held while an operation runs (TTL and
    /// renewal; the lock is renewed while the operation runs).
    pub fn lock_options(mut self, opts: LockOptions) -> Idempotency {
        self.lock = opts;
        self
    }

    fn key(key: &str) -> Result<Name> {
        Name::new(format!("idem/{key}"))
    }

    /// The stored result of `key`, if its operation ran.
    pub async fn result(&self, key: &str) -> Result<Option<String>> {
        let name = Idempotency::key(key)?;
        let records = self.store.backend().records(name.as_str()).await?;
        Ok(records
            .into_iter()
            .find(|(k, _)| k == name.as_str())
            .map(|(_, v)| v))
    }

    /// Runs `operation` unless `key` ran already or runs now (see the
    /// module docs). The operation's `Ok` value is stored and returned; an
    /// `Err` stores nothing.
    pub async fn run<F, Fut, E>(
        &self,
        key: &str,
        operation: F,
    ) -> std::result::Result<Idempotent, IdempotencyError<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<String, E>>,
    {
        let name = Idempotency::key(key)?;
        if let Some(done) = self.result(key).await? {
            return Ok(Idempotent::Stored(done));
        }
        let guard = match self.store.try_acquire(name.as_str(), &self.lock).await {
            Ok(guard) => guard,
            Err(Error::Busy { .. }) => return Ok(Idempotent::InProgress),
            Err(e) => return Err(e.into()),
        };
        // It may have finished between our look and our lock.
        if let Some(done) = self.result(key).await? {
            guard.release().await?;
            return Ok(Idempotent::Stored(done));
        }
        let outcome = tokio::select! {
            outcome = operation() => outcome,
            reason = guard.lost() => {
                return Err(Error::Lost { name: name.to_string(), reason }.into());
            }
        };
        match outcome {
            Ok(result) => {
                self.store
                    .backend()
                    .put_record(&name, &result, self.retention)
                    .await?;
                guard.release().await?;
                Ok(Idempotent::Ran(result))
            }
            Err(e) => {
                guard.release().await?;
                Err(IdempotencyError::Operation(e))
            }
        }
    }
}
