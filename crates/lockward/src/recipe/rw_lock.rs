//! A read-write lock: many readers or one writer, a waiting writer ahead of
//! readers that come after it, fenced, on every backend.
//!
//! Built on two things every store has. The writer holds the plain lock
//! `NAME` for its whole turn. A reader passes through `NAME` too (it takes
//! and releases it at once), then holds a permit of the semaphore
//! `NAME#readers` (see [`Semaphore`]): its own slot lock, lease, renewal
//! and lost signal. So:
//!
//! - readers share: each holds only its permit;
//! - a writer that holds `NAME` waits until no permit is held, and no new
//!   reader can get past `NAME` meanwhile: a waiting writer blocks the
//!   readers that come after it, and readers and writers are served in the
//!   order they queue on `NAME` where the store queues waiters;
//! - a crashed reader's permit comes back after its TTL, a crashed writer's
//!   `NAME` after its own.
//!
//! **Fences.** Every acquisition, read or write, takes a fence of `NAME`
//! from the same counter, so the writer's fence is larger than every
//! earlier fence of the name, readers' and writers'. A reader's fence is
//! the fence of its pass through `NAME`: larger than the fence of every
//! writer before it and smaller than that of every writer after it. A
//! resource that records the fence of each write and refuses smaller ones
//! thus refuses a write from any holder, reader or writer, that is older
//! than the last writer; readers admitted together may share nothing but
//! their order.
//!
//! **Native.** On a store that declares
//! [`Capabilities::native_rw_lock`](crate::Capabilities::native_rw_lock)
//! (ZooKeeper) readers and writers are the store's own: there, in the
//! layout of Curator's `InterProcessReadWriteLock`, so Java services on
//! Curator and lockward share one read-write lock. Fences are then the
//! store's own per-node ones (ZooKeeper: the node's creation zxid), ordered
//! the same way.
//!
//! The exclusive side is [`RwLock::write`], not a plain
//! [`Store::acquire`] of `NAME`: a plain holder of `NAME` keeps new readers
//! out but does not wait for those already reading.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use lockward::recipe::RwLock;
//! let store = lockward::Store::memory();
//! let prices = RwLock::new(store, "prices")?;
//! let opts = lockward::LockOptions::new();
//! let report = prices.read(&opts).await?;
//! let another = prices.read(&opts).await?; // readers share
//! assert!(prices.try_write(&opts).await.is_err());
//! let read_fence = report.fence();
//! report.release().await?;
//! another.release().await?;
//! let writer = prices.write(&opts).await?;
//! assert!(writer.fence() > read_fence);
//! writer.release().await?;
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```

use std::time::Instant;

use super::semaphore::{Permit, Semaphore, MAX_PERMITS};
use crate::backend::Kind;
use crate::error::{Error, LostReason, Result};
use crate::guard::{Guard, LostSignal};
use crate::name::Name;
use crate::options::LockOptions;
use crate::store::Store;

/// A read-write lock on one name.
#[derive(Debug, Clone)]
pub struct RwLock {
    store: Store,
    name: Name,
    readers: Semaphore,
}

/// A held read side: its own lease (a permit of the readers' semaphore)
/// and the reader's fence (see the [module docs](self)).
#[derive(Debug)]
pub struct ReadGuard {
    hold: ReadHold,
    fence: u64,
    name: Name,
}

/// What holds a read side.
#[derive(Debug)]
enum ReadHold {
    /// A permit of the readers' semaphore.
    Permit(Permit),
    /// The store's own reader lock.
    Native(Guard),
}

impl RwLock {
    /// A read-write lock on `name`.
    pub fn new(store: Store, name: impl AsRef<str>) -> Result<RwLock> {
        let name = Name::new(name.as_ref())?;
        let readers = Semaphore::new(store.clone(), format!("{name}#readers"), MAX_PERMITS)?;
        Ok(RwLock {
            store,
            name,
            readers,
        })
    }

    /// The lock's name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// Takes the read side, waiting (up to the options' wait) while a
    /// writer holds or waits for the lock.
    ///
    /// Cancellation: dropping the future gives up the place in line; a
    /// permit taken at that moment frees at its TTL at the latest.
    #[tracing::instrument(name = "rw_read", level = "debug", skip_all, fields(lock = %self.name))]
    pub async fn read(&self, opts: &LockOptions) -> Result<ReadGuard> {
        if self.native() {
            let reader = self
                .store
                .acquire_as(self.name.as_str(), opts, Kind::Reader)
                .await?;
            return Ok(self.native_reader(reader));
        }
        let gate = self.store.acquire(&self.name, opts).await?;
        self.admit_reader(gate, opts).await
    }

    /// Takes the read side if no writer holds or waits, else fails at once
    /// with [`Error::Busy`]. Cancellation: as for [`read`](RwLock::read).
    #[tracing::instrument(name = "rw_try_read", level = "debug", skip_all, fields(lock = %self.name))]
    pub async fn try_read(&self, opts: &LockOptions) -> Result<ReadGuard> {
        if self.native() {
            let reader = self
                .store
                .try_acquire_as(self.name.as_str(), opts, Kind::Reader)
                .await?;
            return Ok(self.native_reader(reader));
        }
        let gate = self.store.try_acquire(&self.name, opts).await?;
        self.admit_reader(gate, opts).await
    }

    /// Takes the write side, waiting (up to the options' wait, counted once
    /// over both steps) for the lock and then for the readers to finish.
    /// The guard is the lock `NAME` itself: its fence, lease and lost
    /// signal are the writer's.
    ///
    /// Cancellation: dropping the future releases `NAME` (in the
    /// background, as a dropped guard does) and gives up the wait.
    #[tracing::instrument(name = "rw_write", level = "debug", skip_all, fields(lock = %self.name))]
    pub async fn write(&self, opts: &LockOptions) -> Result<Guard> {
        if self.native() {
            return self
                .store
                .acquire_as(self.name.as_str(), opts, Kind::Writer)
                .await;
        }
        let began = Instant::now();
        let writer = self.store.acquire(&self.name, opts).await?;
        let drained = self.drain(&opts.wait_left(began), true).await;
        match Self::writer_once(writer, drained).await {
            // The wait was one, over both steps.
            Err(Error::TimedOut { name, .. }) => Err(Error::TimedOut {
                name,
                waited: began.elapsed(),
            }),
            other => other,
        }
    }

    /// Takes the write side if nobody reads or writes, else fails at once
    /// with [`Error::Busy`]. Cancellation: as for [`write`](RwLock::write).
    #[tracing::instrument(name = "rw_try_write", level = "debug", skip_all, fields(lock = %self.name))]
    pub async fn try_write(&self, opts: &LockOptions) -> Result<Guard> {
        if self.native() {
            return self
                .store
                .try_acquire_as(self.name.as_str(), opts, Kind::Writer)
                .await;
        }
        let writer = self.store.try_acquire(&self.name, opts).await?;
        let drained = self.drain(opts, false).await;
        Self::writer_once(writer, drained).await
    }

    /// Turns a plain hold of `NAME` (for example one lock of a
    /// [`MultiGuard`](crate::MultiGuard)) into the write side: waits (up to
    /// the options' wait) until no reader holds the lock. [`Error::InvalidArgument`]
    /// when `held` is not this lock's name. On a native store a plain hold
    /// already waited for the readers ahead of it and keeps lockward's
    /// readers out (but not other clients' readers, such as Curator's).
    ///
    /// Cancellation: dropping the future gives up the wait; `held` stays
    /// held.
    pub async fn exclude_readers(&self, held: &Guard, opts: &LockOptions) -> Result<()> {
        if held.name() != &self.name {
            return Err(Error::invalid(
                "guard",
                format!("it holds \"{}\", not \"{}\"", held.name(), self.name),
            ));
        }
        if self.native() {
            return Ok(());
        }
        self.drain(opts, true).await
    }

    /// How many readers hold the lock now, where the lock is built on a
    /// semaphore (one read of the readers' ledger and a look at each
    /// reader's slot); [`Error::NotSupported`] on a native store. Cancelling
    /// it changes nothing.
    pub async fn readers(&self) -> Result<u32> {
        if self.native() {
            return Err(Error::NotSupported {
                address: self.store.address(),
                what: "counting readers",
                why: "readers there are the store's own nodes; see `status`",
            });
        }
        self.readers.held().await
    }

    fn native(&self) -> bool {
        self.store.capabilities().native_rw_lock
    }

    fn native_reader(&self, reader: Guard) -> ReadGuard {
        ReadGuard {
            fence: reader.fence(),
            hold: ReadHold::Native(reader),
            name: self.name.clone(),
        }
    }

    /// With `gate` (the pass through `NAME`) held: a permit, then `gate`
    /// let go. No writer holds `NAME`, so the permit is free at once unless
    /// the readers' semaphore is full.
    async fn admit_reader(&self, gate: Guard, opts: &LockOptions) -> Result<ReadGuard> {
        let fence = gate.fence();
        let permit = self.readers.try_acquire(opts).await;
        let _ = gate.release().await;
        Ok(ReadGuard {
            hold: ReadHold::Permit(permit?),
            fence,
            name: self.name.clone(),
        })
    }

    /// `writer` as the write side once the readers `drained`; released when
    /// they did not.
    async fn writer_once(writer: Guard, drained: Result<()>) -> Result<Guard> {
        match drained {
            Ok(()) => Ok(writer),
            Err(e) => {
                let _ = writer.release().await;
                Err(e)
            }
        }
    }

    /// Holding `NAME`: returns once no reader holds a permit (or at once
    /// with `Busy` unless `wait`). New readers cannot come meanwhile.
    /// Errors name this lock, not its readers' semaphore.
    async fn drain(&self, opts: &LockOptions, wait: bool) -> Result<()> {
        self.drain_readers(opts, wait).await.map_err(|e| match e {
            Error::TimedOut { waited, .. } => Error::TimedOut {
                name: self.name.to_string(),
                waited,
            },
            // Readers hold permits: the write side is busy.
            Error::Busy { .. } | Error::NoPermits { .. } => Error::Busy {
                name: self.name.to_string(),
            },
            other => other,
        })
    }

    async fn drain_readers(&self, opts: &LockOptions, wait: bool) -> Result<()> {
        // The common case, nobody reading: one read of the ledger.
        if self.readers.held().await? == 0 {
            return Ok(());
        }
        // Every permit at once is free only when every reader is gone (a
        // crashed one's after its TTL); taken and given straight back.
        let all = if wait {
            self.readers.acquire_many(MAX_PERMITS, opts).await?
        } else {
            self.readers.try_acquire_many(MAX_PERMITS, opts).await?
        };
        all.release().await
    }
}

impl ReadGuard {
    /// The reader's fence (see the [module docs](self)).
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The lock's name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The reader's own lease: a slot lock of the readers' semaphore, or
    /// the store's own reader lock where it is native.
    pub fn guard(&self) -> &Guard {
        match &self.hold {
            ReadHold::Permit(permit) => permit.guard(),
            ReadHold::Native(guard) => guard,
        }
    }

    /// The local deadline of the reader's lease.
    pub fn deadline(&self) -> Instant {
        self.guard().deadline()
    }

    /// A handle on the reader's lost signal.
    pub fn lost_signal(&self) -> LostSignal {
        self.guard().lost_signal()
    }

    /// Resolves when the reader's lease is lost. Cancel-safe.
    pub async fn lost(&self) -> LostReason {
        self.guard().lost().await
    }

    /// Gives the read side back. Cancellation: as for
    /// [`Permit::release`].
    pub async fn release(self) -> Result<()> {
        match self.hold {
            ReadHold::Permit(permit) => permit.release().await,
            ReadHold::Native(guard) => guard.release().await,
        }
    }
}
