//! Idempotency keys: run an operation at most once per key, and hand later
//! duplicates the stored result instead of running it again.
//!
//! For key `K` in namespace `N` (`idem` unless [`Idempotency::namespace`]
//! says otherwise), the operation runs under the lock `N/K` and its result
//! is stored as the record `N/K`, read back by its exact key:
//!
//! - a duplicate that arrives while the first still runs gets
//!   [`Idempotent::InProgress`] (it does not wait, as a payment API answers
//!   "409 in progress"), or, with [`Idempotency::waiting`], waits for it
//!   and then gets its result;
//! - a duplicate that arrives later gets [`Idempotent::Stored`] with the
//!   first result, without running anything;
//! - a run that fails stores nothing, so the key stays free for a retry.
//!
//! The result is stored while the lock is still held, so no duplicate can
//! slip in between the run and its record. It is kept for the retention
//! given (the store's own expiry), or forever with
//! [`Idempotency::permanent`] where the store declares
//! [`permanent_records`](crate::Capabilities::permanent_records) (see the
//! table there; the others refuse with [`Error::NotSupported`] before
//! anything runs). [`Idempotency::begin`] gives the steps one by one, for callers
//! that run the operation themselves (`lockward once` runs a command).
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

use std::future::Future;
use std::time::Duration;

use crate::duration::check_retention;
use crate::error::{Error, Result};
use crate::guard::Guard;
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
    namespace: String,
    /// `None`: forever.
    retention: Option<Duration>,
    lock: LockOptions,
    waiting: bool,
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

/// What [`Idempotency::begin`] found.
#[derive(Debug)]
pub enum Begun {
    /// The operation ran before; this is its stored result.
    Stored(String),
    /// Another caller is running it right now (only without
    /// [`Idempotency::waiting`]).
    InProgress,
    /// This caller holds the key's lock and must run the operation, then
    /// [`Claim::complete`] or [`Claim::abandon`] it.
    Claimed(Box<Claim>),
}

/// The right to run one key's operation: the key's lock, held.
#[derive(Debug)]
pub struct Claim {
    store: Store,
    guard: Guard,
    key: Name,
    retention: Option<Duration>,
}

impl Claim {
    /// The key's lock: its fence fences the operation's writes, and its
    /// `lost()` fires if the claim ends before the operation does.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// Stores `result` as the key's result, then releases the lock. Fails
    /// with [`Error::Lost`] (storing nothing) when the lock was lost, since
    /// another caller may be running the operation by then.
    ///
    /// Cancellation: before the record is written, nothing is stored and
    /// the lock is released in the background.
    pub async fn complete(self, result: &str) -> Result<()> {
        if let Some(reason) = self.guard.lost_reason() {
            return Err(Error::Lost {
                name: self.key.to_string(),
                reason,
            });
        }
        let stored = match self.retention {
            Some(retention) => {
                self.store
                    .put_record(self.key.as_str(), result, retention)
                    .await
            }
            None => {
                self.store
                    .put_permanent_record(self.key.as_str(), result)
                    .await
            }
        };
        let released = self.guard.release().await;
        stored?;
        crate::metrics::idempotent("ran");
        match released {
            Ok(()) | Err(Error::Lost { .. } | Error::NotOwner { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Releases the lock without storing anything: the key stays free for
    /// a retry.
    ///
    /// Cancellation: an abandon cut short leaves the key claimed until its
    /// claim's TTL.
    pub async fn abandon(self) -> Result<()> {
        match self.guard.release().await {
            Ok(()) | Err(Error::Lost { .. } | Error::NotOwner { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Idempotency {
    /// Idempotency keys on `store`, keeping results for a day.
    pub fn new(store: Store) -> Idempotency {
        Idempotency {
            store,
            namespace: "idem".into(),
            retention: Some(DEFAULT_RETENTION),
            lock: LockOptions::new(),
            waiting: false,
        }
    }

    /// Keeps results for `retention` (at most 100 years; checked when a
    /// result is stored).
    pub fn retention(mut self, retention: Duration) -> Idempotency {
        self.retention = Some(retention);
        self
    }

    /// Keeps results forever, as a payment's outcome must be: only where the
    /// store declares
    /// [`permanent_records`](crate::Capabilities::permanent_records).
    /// Elsewhere [`begin`](Self::begin) and [`run`](Self::run) fail with
    /// [`Error::NotSupported`] before claiming the key.
    pub fn permanent(mut self) -> Idempotency {
        self.retention = None;
        self
    }

    /// Keeps this set of keys under `namespace` (`idem` by default), apart
    /// from other sets on the same store.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Idempotency {
        self.namespace = namespace.into();
        self
    }

    /// The options of the lock held while an operation runs (TTL, renewal
    /// and, with [`waiting`](Self::waiting), how long to wait).
    pub fn lock_options(mut self, opts: LockOptions) -> Idempotency {
        self.lock = opts;
        self
    }

    /// With `true`, a duplicate that arrives while the operation runs waits
    /// for it (up to the lock options' wait, [`Error::TimedOut`] then) and
    /// gets its result, or runs it if that run failed.
    pub fn waiting(mut self, waiting: bool) -> Idempotency {
        self.waiting = waiting;
        self
    }

    fn key(&self, key: &str) -> Result<Name> {
        Name::new(format!("{}/{key}", self.namespace))
    }

    /// The stored result of `key`, if its operation ran: one read of the
    /// exact key.
    ///
    /// Cancellation: dropping the future changes nothing.
    pub async fn result(&self, key: &str) -> Result<Option<String>> {
        self.store.record(self.key(key)?.as_str()).await
    }

    /// Looks for `key`'s result, and claims the key when there is none (see
    /// [`Begun`]).
    ///
    /// Dropping the future while it waits for the lock cancels the wait and
    /// leaves nothing behind.
    ///
    /// Cancellation: dropping the future leaves no claim behind beyond its TTL;
    /// a claim granted at that moment is released in the background.
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn begin(&self, key: &str) -> Result<Begun> {
        let name = self.key(key)?;
        match self.retention {
            Some(retention) => {
                check_retention(retention)?;
            }
            None if !self.store.capabilities().permanent_records => {
                return Err(self.store.cannot_keep_forever());
            }
            None => {}
        }
        if let Some(done) = self.store.record(name.as_str()).await? {
            crate::metrics::idempotent("stored");
            return Ok(Begun::Stored(done));
        }
        let guard = if self.waiting {
            self.store.acquire(name.as_str(), &self.lock).await?
        } else {
            match self.store.try_acquire(name.as_str(), &self.lock).await {
                Ok(guard) => guard,
                Err(Error::Busy { .. }) => {
                    crate::metrics::idempotent("in_progress");
                    return Ok(Begun::InProgress);
                }
                Err(e) => return Err(e),
            }
        };
        // It may have finished between our look and our lock.
        if let Some(done) = self.store.record(name.as_str()).await? {
            guard.release().await?;
            crate::metrics::idempotent("stored");
            return Ok(Begun::Stored(done));
        }
        Ok(Begun::Claimed(Box::new(Claim {
            store: self.store.clone(),
            guard,
            key: name,
            retention: self.retention,
        })))
    }

    /// Runs `operation` unless `key` ran already or runs now (see the
    /// module docs). The operation's `Ok` value is stored and returned; an
    /// `Err` stores nothing.
    ///
    /// If the lock is lost while the operation runs, the operation's future
    /// is dropped and [`Error::Lost`] returned. Dropping this future drops
    /// the operation and releases the lock in the background, storing
    /// nothing.
    ///
    /// Cancellation: dropping the future drops the operation and stores no
    /// result; the claim is released in the background, so the key is free for
    /// a retry.
    pub async fn run<F, Fut, E>(
        &self,
        key: &str,
        operation: F,
    ) -> std::result::Result<Idempotent, IdempotencyError<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<String, E>>,
    {
        let claim = match self.begin(key).await? {
            Begun::Stored(done) => return Ok(Idempotent::Stored(done)),
            Begun::InProgress => return Ok(Idempotent::InProgress),
            Begun::Claimed(claim) => *claim,
        };
        let outcome = tokio::select! {
            outcome = operation() => outcome,
            reason = claim.guard.lost() => {
                return Err(Error::Lost { name: claim.key.to_string(), reason }.into());
            }
        };
        match outcome {
            Ok(result) => {
                claim.complete(&result).await?;
                Ok(Idempotent::Ran(result))
            }
            Err(e) => {
                claim.abandon().await?;
                Err(IdempotencyError::Operation(e))
            }
        }
    }
}
