//! A counting semaphore: at most N holders of one name at a time, across
//! processes and hosts, on every backend.
//!
//! The N permits are N locks, `NAME#permit/0` … `NAME#permit/N-1`. A
//! permit is a [`Guard`] like any other: its own lease, renewal, fence and
//! `lost()` signal, and a crashed holder's permit comes back after its TTL.
//! Fences increase per permit, so a resource shared by the holders of one
//! permit slot can still refuse a stale write.
//!
//! Taking a permit first tries every slot at once without waiting; when
//! all are held, it waits on every slot together (with the backend's pushed
//! wake-ups) and keeps the first granted, giving back any other.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use lockward::recipe::Semaphore;
//! let store = lockward::Store::memory();
//! let reports = Semaphore::new(store, "reports", 2)?;
//! let opts = lockward::LockOptions::new();
//! let a = reports.try_acquire(&opts).await?;
//! let b = reports.try_acquire(&opts).await?;
//! assert!(reports.try_acquire(&opts).await.is_err()); // both permits are out
//! a.release().await?;
//! # drop(b);
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```

use std::time::Instant;

use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::name::Name;
use crate::options::LockOptions;
use crate::store::Store;

/// The most permits one semaphore may have: each waiter waits on every
/// slot, so the count is kept small.
pub const MAX_PERMITS: u32 = 64;

/// N leased permits on one name.
#[derive(Debug, Clone)]
pub struct Semaphore {
    store: Store,
    name: String,
    permits: u32,
}

/// One permit: a held lock on one slot.
#[derive(Debug)]
pub struct Permit {
    guard: Guard,
    slot: u32,
}

impl Permit {
    /// Which of the N slots this permit is (0-based).
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The permit's lock: its fence, deadline and `lost()` signal.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The permit's lock itself, to release or hand on as a guard.
    pub fn into_guard(self) -> Guard {
        self.guard
    }

    /// Gives the permit back.
    pub async fn release(self) -> Result<()> {
        self.guard.release().await
    }
}

impl Semaphore {
    /// A semaphore of `permits` (1 to [`MAX_PERMITS`]) on `name`.
    pub fn new(store: Store, name: impl Into<String>, permits: u32) -> Result<Semaphore> {
        let name = name.into();
        Name::new(&name)?;
        if permits == 0 || permits > MAX_PERMITS {
            return Err(Error::invalid(
                "permits",
                format!("a semaphore has 1 to {MAX_PERMITS} permits, not {permits}"),
            ));
        }
        let semaphore = Semaphore {
            store,
            name,
            permits,
        };
        Name::new(semaphore.slot_name(permits - 1))?;
        Ok(semaphore)
    }

    /// The lock name of slot `i`.
    pub fn slot_name(&self, i: u32) -> String {
        format!("{}#permit/{i}", self.name)
    }

    /// How many permits there are.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// How many permits are held now.
    pub async fn held(&self) -> Result<u32> {
        let mut held = 0;
        for i in 0..self.permits {
            if self.store.inspect(self.slot_name(i)).await?.is_some() {
                held += 1;
            }
        }
        Ok(held)
    }

    /// Takes a free permit, else fails at once with [`Error::Busy`].
    pub async fn try_acquire(&self, opts: &LockOptions) -> Result<Permit> {
        // Start at a random slot, so holders spread over the slots.
        let first = fastrand::u32(0..self.permits);
        for k in 0..self.permits {
            let slot = (first + k) % self.permits;
            match self.store.try_acquire(self.slot_name(slot), opts).await {
                Ok(guard) => return Ok(Permit { guard, slot }),
                Err(Error::Busy { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::Busy {
            name: self.name.clone(),
        })
    }

    /// Takes a permit, waiting up to the options' wait limit
    /// ([`Error::TimedOut`] then). Drop the future to cancel the wait.
    pub async fn acquire(&self, opts: &LockOptions) -> Result<Permit> {
        let began = Instant::now();
        match self.try_acquire(opts).await {
            Err(Error::Busy { .. }) => {}
            other => return other,
        }
        let mut waits = tokio::task::JoinSet::new();
        for slot in 0..self.permits {
            let (store, name, opts) = (self.store.clone(), self.slot_name(slot), opts.clone());
            waits.spawn(async move { (slot, store.acquire(name, &opts).await) });
        }
        let mut outcome = Err(Error::TimedOut {
            name: self.name.clone(),
            waited: began.elapsed(),
        });
        while let Some(done) = waits.join_next().await {
            match done {
                Ok((slot, Ok(guard))) => {
                    outcome = Ok(Permit { guard, slot });
                    break;
                }
                Ok((_, Err(Error::TimedOut { .. }))) => {}
                Ok((_, Err(e))) => {
                    outcome = Err(e);
                    break;
                }
                Err(e) => {
                    outcome = Err(Error::Protocol {
                        address: self.store.address(),
                        message: format!("a permit wait of {:?} ended abnormally: {e}", self.name),
                    });
                    break;
                }
            }
        }
        // Stop the other waits; give back a permit granted meanwhile.
        waits.abort_all();
        while let Some(done) = waits.join_next().await {
            if let Ok((_, Ok(extra))) = done {
                let _ = extra.release().await;
            }
        }
        if let Err(Error::TimedOut { .. }) = outcome {
            return Err(Error::TimedOut {
                name: self.name.clone(),
                waited: began.elapsed(),
            });
        }
        outcome
    }
}
