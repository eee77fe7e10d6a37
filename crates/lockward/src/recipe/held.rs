//! Whatever a caller holds, as one type: a lock, several locks, a reader's
//! share, permits, a leadership or an idempotency key's claim. For code that
//! holds on others' behalf and treats every hold alike: renews it, releases
//! it, reports its fences and its loss (the daemon's lease streams, the
//! Python package's leases).
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use lockward::recipe::{Held, Wanted};
//! let store = lockward::Store::memory();
//! let opts = lockward::LockOptions::new();
//! store.acquire("b", &opts).await?.release().await?;
//! // Taken in sorted order, reported in the order asked: b's fence is the
//! // newer one.
//! let names = ["b".to_string(), "a".to_string()];
//! let held = Held::take(&store, Wanted::Locks(&names), &opts, false).await?;
//! let fences = held.fences();
//! assert!(fences[0] > fences[1], "{fences:?}");
//! assert_eq!(held.name(), "b");
//! held.release().await?;
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```

use std::time::{Duration, Instant};

use super::{Claim, Leadership, MultiGuard, Permit, ReadGuard, RwLock, Semaphore};
use crate::error::Result;
use crate::guard::{Guard, LostSignal};
use crate::options::LockOptions;
use crate::store::Store;

/// What [`Held::take`] takes.
#[derive(Debug, Clone, Copy)]
pub enum Wanted<'a> {
    /// One exclusive lock, or several taken together (all or none).
    Locks(&'a [String]),
    /// A reader's share of the read-write lock of that name.
    Read(&'a str),
    /// The writer's side of the read-write lock of that name.
    Write(&'a str),
    /// `take` of the `permits` permits of a semaphore.
    Permits {
        /// The semaphore's name.
        semaphore: &'a str,
        /// How many permits it has.
        permits: u32,
        /// How many this holder takes.
        take: u32,
    },
}

/// One hold of any kind.
#[derive(Debug)]
pub enum Held {
    /// An exclusive lock (or a read-write lock's writer).
    Lock(Guard),
    /// Several locks taken together, and the order they were asked in.
    All {
        /// The locks.
        locks: MultiGuard,
        /// The names as asked (the locks keep them sorted).
        asked: Vec<String>,
    },
    /// A reader's share of a read-write lock.
    Read(ReadGuard),
    /// Some of a semaphore's permits.
    Permits(Permit),
    /// An election's leadership.
    Leader(Leadership),
    /// The right to run an idempotency key's operation.
    Claim(Box<Claim>),
}

impl Held {
    /// Takes what `wanted` names on `store`: waiting as `opts` say, or,
    /// with `try_only`, only if it is free now.
    ///
    /// Cancellation: as for the acquisition it makes: dropping the future
    /// ends the wait and leaves nothing held.
    pub async fn take(
        store: &Store,
        wanted: Wanted<'_>,
        opts: &LockOptions,
        try_only: bool,
    ) -> Result<Held> {
        match wanted {
            Wanted::Locks([name]) if try_only => {
                store.try_acquire(name, opts).await.map(Held::Lock)
            }
            Wanted::Locks([name]) => store.acquire(name, opts).await.map(Held::Lock),
            Wanted::Locks(names) => {
                let locks = if try_only {
                    store.try_acquire_all(names, opts).await?
                } else {
                    store.acquire_all(names, opts).await?
                };
                Ok(Held::all(locks, names))
            }
            Wanted::Read(name) => {
                let lock = RwLock::new(store.clone(), name)?;
                let reader = if try_only {
                    lock.try_read(opts).await
                } else {
                    lock.read(opts).await
                };
                reader.map(Held::Read)
            }
            Wanted::Write(name) => {
                let lock = RwLock::new(store.clone(), name)?;
                let writer = if try_only {
                    lock.try_write(opts).await
                } else {
                    lock.write(opts).await
                };
                writer.map(Held::Lock)
            }
            Wanted::Permits {
                semaphore,
                permits,
                take,
            } => {
                let semaphore = Semaphore::new(store.clone(), semaphore, permits)?;
                let permit = if try_only {
                    semaphore.try_acquire_many(take, opts).await
                } else {
                    semaphore.acquire_many(take, opts).await
                };
                permit.map(Held::Permits)
            }
        }
    }

    /// Several locks, with the order they were asked in (for
    /// [`fences`](Self::fences)).
    pub fn all(locks: MultiGuard, asked: &[String]) -> Held {
        Held::All {
            locks,
            asked: asked.to_vec(),
        }
    }

    /// The guard of every lock held (one, but for several locks).
    pub fn guards(&self) -> Vec<&Guard> {
        match self {
            Held::Lock(g) => vec![g],
            Held::All { locks, .. } => locks.guards().iter().collect(),
            Held::Read(r) => vec![r.guard()],
            Held::Permits(p) => vec![p.guard()],
            Held::Leader(l) => vec![l.guard()],
            Held::Claim(c) => vec![c.guard()],
        }
    }

    /// The name held (the first asked, for several locks).
    pub fn name(&self) -> String {
        match self {
            Held::All { asked, .. } => asked.first().cloned().unwrap_or_default(),
            other => other.guards()[0].name().to_string(),
        }
    }

    /// The fence of each lock, in the order asked.
    pub fn fences(&self) -> Vec<u64> {
        match self {
            Held::All { locks, asked } => asked
                .iter()
                .map(|name| locks.fence(name).unwrap_or_default())
                .collect(),
            other => other.guards().iter().map(|g| g.fence()).collect(),
        }
    }

    /// When the first of the locks ends unless renewed.
    pub fn deadline(&self) -> Instant {
        self.guards()
            .iter()
            .map(|g| g.deadline())
            .min()
            .unwrap_or_else(Instant::now)
    }

    /// Fires when the hold is lost (any of its locks, for several).
    pub fn lost_signal(&self) -> LostSignal {
        match self {
            Held::All { locks, .. } => locks.lost_signal(),
            Held::Read(r) => r.lost_signal(),
            other => other.guards()[0].lost_signal(),
        }
    }

    /// Renews every lock held for `ttl` (`None`: the TTL each had).
    ///
    /// Cancellation: a renewal cut short leaves each lock with the
    /// deadline its last confirmed renewal gave.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<()> {
        for guard in self.guards() {
            guard.extend(ttl).await?;
        }
        Ok(())
    }

    /// Gives everything back: a leader resigns, a claim is abandoned
    /// (nothing stored).
    ///
    /// Cancellation: a release cut short leaves what was not released yet
    /// to lapse at its TTL.
    pub async fn release(self) -> Result<()> {
        match self {
            Held::Lock(g) => g.release().await,
            Held::All { locks, .. } => locks.release().await,
            Held::Read(r) => r.release().await,
            Held::Permits(p) => p.release().await,
            Held::Leader(l) => l.resign().await,
            Held::Claim(c) => c.abandon().await,
        }
    }
}
