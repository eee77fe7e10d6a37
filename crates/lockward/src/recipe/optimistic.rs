//! Optimistic updates: read a versioned record, compute, and write only if
//! nobody wrote in between; on a conflict, read again and retry, with
//! jittered backoff and a bounded number of tries.
//!
//! Each store checks the version itself, in one step: SQL's `UPDATE …
//! WHERE version = $n`, a Redis script, an etcd transaction on the mod
//! revision, a ZooKeeper `setData` at a version, a majority of Redlock
//! masters (see [`RecordBackend::write_versioned`]).
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use lockward::recipe::Optimistic;
//! let stock = Optimistic::new(lockward::Store::memory());
//! stock.update("item-1", |v| Ok::<_, String>(v.map_or("5".into(), str::to_string))).await?;
//! let sold = stock
//!     .update("item-1", |v| {
//!         let left: u32 = v.unwrap_or("0").parse().unwrap();
//!         if left == 0 { return Err("sold out".to_string()) }
//!         Ok((left - 1).to_string())
//!     })
//!     .await?;
//! assert_eq!(sold.value, "4");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! [`RecordBackend::write_versioned`]: crate::backend::RecordBackend::write_versioned

use std::time::Duration;

use crate::backend::Versioned;
use crate::error::{Error, Result};
use crate::name::Name;
use crate::store::Store;

/// Versioned records are kept this long unless told otherwise.
pub const DEFAULT_KEEP_FOR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Compare-and-set updates of versioned records on one store.
#[derive(Debug, Clone)]
pub struct Optimistic {
    store: Store,
    tries: u32,
    keep_for: Duration,
}

/// A successful update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Updated {
    /// The value written.
    pub value: String,
    /// Its version.
    pub version: u64,
    /// How many conflicting writes were met (and retried) on the way.
    pub conflicts: u32,
}

/// Why an update did not happen.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError<E> {
    /// The update function declined (e.g. "sold out"); nothing was written.
    #[error("the update was declined: {0}")]
    Declined(E),
    /// Every try met a conflicting write.
    #[error("{key:?} changed under every one of {tries} tries")]
    Contended {
        /// The record.
        key: String,
        /// How many tries were made.
        tries: u32,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] Error),
}

impl Optimistic {
    /// Updates on `store`, with up to 16 tries each.
    pub fn new(store: Store) -> Optimistic {
        Optimistic {
            store,
            tries: 16,
            keep_for: DEFAULT_KEEP_FOR,
        }
    }

    /// At most `tries` tries per update (at least 1).
    pub fn tries(mut self, tries: u32) -> Optimistic {
        self.tries = tries.max(1);
        self
    }

    /// Keeps each written record for `keep_for`.
    pub fn keep_for(mut self, keep_for: Duration) -> Optimistic {
        self.keep_for = keep_for;
        self
    }

    /// The record of `key` and its version, if it exists.
    ///
    /// Cancellation: dropping the future changes nothing.
    pub async fn read(&self, key: &str) -> Result<Option<Versioned>> {
        self.store.read_versioned(key).await
    }

    /// Writes `value` if `key` is still at `expected` (0: absent): the new
    /// version, or `None` on a conflict.
    ///
    /// A cancelled call may or may not have written; read again to know.
    ///
    /// Cancellation: the write may or may not have landed; read again to know
    /// (a retried write with the same expected version is refused if it did).
    pub async fn write(&self, key: &str, expected: u64, value: &str) -> Result<Option<u64>> {
        self.store
            .write_versioned(key, expected, value, self.keep_for)
            .await
    }

    /// Reads `key`, applies `f` to its value (`None` when absent) and writes
    /// the result if nobody wrote meanwhile; retries on conflicts. `f` may
    /// run several times; an `Err` from it stops the update.
    ///
    /// Cancellation: between tries it writes nothing; during a write, that
    /// write may or may not have landed.
    pub async fn update<F, E>(
        &self,
        key: &str,
        mut f: F,
    ) -> std::result::Result<Updated, UpdateError<E>>
    where
        F: FnMut(Option<&str>) -> std::result::Result<String, E>,
    {
        let keep_for = self.keep_for;
        let applied = self
            .apply(key, |current| match f(current) {
                Ok(next) => Change::Write {
                    value: next.clone(),
                    keep_for,
                    outcome: Ok(next),
                },
                Err(e) => Change::Keep(Err(e)),
            })
            .await;
        match applied {
            Ok(Applied {
                outcome: Ok(value),
                version: Some(version),
                conflicts,
            }) => Ok(Updated {
                value,
                version,
                conflicts,
            }),
            Ok(Applied {
                outcome: Err(e), ..
            }) => Err(UpdateError::Declined(e)),
            Ok(Applied { version: None, .. }) => unreachable!("a write always has a version"),
            Err(Error::Contended { key, tries }) => Err(UpdateError::Contended { key, tries }),
            Err(e) => Err(UpdateError::Store(e)),
        }
    }

    /// The general form of [`update`](Self::update): `f` sees the current
    /// value and decides to write a new one (for how long) or to write
    /// nothing, with an outcome of its own either way, which is returned
    /// once a write sticks (or at once when nothing is written). Rate limits
    /// are built on it. [`Error::Contended`] when every try met a conflict.
    ///
    /// Cancellation: as for [`update`](Self::update).
    pub async fn apply<T, F>(&self, key: &str, mut f: F) -> Result<Applied<T>>
    where
        F: FnMut(Option<&str>) -> Change<T>,
    {
        let name = Name::new(key)?;
        let mut conflicts = 0;
        for attempt in 0..self.tries {
            if attempt > 0 {
                tokio::time::sleep(backoff(attempt)).await;
            }
            let current = self.store.read_versioned(name.as_str()).await?;
            let (value, expected) = match &current {
                Some(v) => (Some(v.value.as_str()), v.version),
                None => (None, 0),
            };
            let (value, keep_for, outcome) = match f(value) {
                Change::Keep(outcome) => {
                    return Ok(Applied {
                        outcome,
                        version: None,
                        conflicts,
                    })
                }
                Change::Write {
                    value,
                    keep_for,
                    outcome,
                } => (value, keep_for, outcome),
            };
            let keep_for = keep_for.max(Duration::from_millis(1));
            match self
                .store
                .write_versioned(name.as_str(), expected, &value, keep_for)
                .await?
            {
                Some(version) => {
                    return Ok(Applied {
                        outcome,
                        version: Some(version),
                        conflicts,
                    })
                }
                None => conflicts += 1,
            }
        }
        Err(Error::Contended {
            key: key.to_string(),
            tries: self.tries,
        })
    }
}

/// What the function given to [`Optimistic::apply`] decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<T> {
    /// Write `value`, kept for `keep_for`; `outcome` is returned once the
    /// write sticks.
    Write {
        /// The new value.
        value: String,
        /// How long the record is kept (at least 1 ms).
        keep_for: Duration,
        /// What the caller gets back.
        outcome: T,
    },
    /// Write nothing and return this outcome.
    Keep(T),
}

/// What [`Optimistic::apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied<T> {
    /// The outcome the function returned on the try that counted.
    pub outcome: T,
    /// The version written, or `None` when the function wrote nothing.
    pub version: Option<u64>,
    /// How many conflicting writes were met (and retried) on the way.
    pub conflicts: u32,
}

/// Full jitter on 1 ms doubling to at most 100 ms.
fn backoff(attempt: u32) -> Duration {
    let cap = (1u64 << attempt.min(7)).min(100);
    Duration::from_micros(fastrand::u64(0..=cap * 1_000))
}
