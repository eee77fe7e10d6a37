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
//! readers and writers are the store's own, one step each: on ZooKeeper in
//! the layout of Curator's `InterProcessReadWriteLock`, so Java services on
//! Curator and lockward share one read-write lock; on PostgreSQL advisory
//! mode shared advisory locks; on Redis and Redis Cluster a set of readers
//! beside the name's lock key, in the name's line of waiters; on etcd a key
//! per reader beside the writers' line, ordered by revision. Fences are
//! then the store's own (ZooKeeper: the node's creation zxid; Redis: the
//! name's counter; etcd: the key's create revision), ordered the same way.
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
    /// writer holds or waits for the lock. Should the pass through `NAME`
    /// run out before the reader's permit is taken (the process paused past
    /// the TTL), the permit is given back and the read side asked for
    /// again within the same wait: a writer may have got in meanwhile.
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
        let began = Instant::now();
        loop {
            let left = opts.wait_left(began);
            let gate = self.store.acquire(&self.name, &left).await?;
            match self.admit_reader(gate, &left).await {
                // The pass through `NAME` ran out before the permit was
                // taken (a pause, a stalled store): a writer may have got
                // in meanwhile, so the permit was given back. Again.
                Err(Error::Lost { .. }) => continue,
                other => return other,
            }
        }
    }

    /// Takes the read side if no writer holds or waits, else fails at once
    /// with [`Error::Busy`]; [`Error::Lost`] when the pass through `NAME`
    /// ran out before the permit was taken three times running (see
    /// [`read`](RwLock::read)).
    ///
    /// Cancellation: as for `read`.
    #[tracing::instrument(name = "rw_try_read", level = "debug", skip_all, fields(lock = %self.name))]
    pub async fn try_read(&self, opts: &LockOptions) -> Result<ReadGuard> {
        if self.native() {
            let reader = self
                .store
                .try_acquire_as(self.name.as_str(), opts, Kind::Reader)
                .await?;
            return Ok(self.native_reader(reader));
        }
        let mut tries = 0;
        loop {
            let gate = self.store.try_acquire(&self.name, opts).await?;
            match self.admit_reader(gate, opts).await {
                // As in `read`; a store that keeps stalling ends it.
                Err(Error::Lost { .. }) if tries < 2 => tries += 1,
                other => return other,
            }
        }
    }

    /// Takes the write side, waiting (up to the options' wait, counted once
    /// over both steps) for the lock and then for the readers to finish.
    /// The guard is the lock `NAME` itself: its fence, lease and lost
    /// signal are the writer's. Should `NAME` run out while the readers
    /// drain (the process paused past the TTL), it is let go and taken
    /// again within the same wait: readers may have got in meanwhile.
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
        loop {
            let writer = self
                .store
                .acquire(&self.name, &opts.wait_left(began))
                .await?;
            let drained = self.drain(&opts.wait_left(began), true).await;
            match Self::writer_once(writer, drained).await {
                // `NAME` ran out while the readers drained (a pause, a
                // stalled store): readers may have got in. Again.
                Err(Error::Lost { .. }) => continue,
                // The wait was one, over both steps.
                Err(Error::TimedOut { name, .. }) => {
                    return Err(Error::TimedOut {
                        name,
                        waited: began.elapsed(),
                    })
                }
                other => return other,
            }
        }
    }

    /// Takes the write side if nobody reads or writes, else fails at once
    /// with [`Error::Busy`]; [`Error::Lost`] when `NAME` ran out while the
    /// readers were counted three times running (see
    /// [`write`](RwLock::write)).
    ///
    /// Cancellation: as for `write`.
    #[tracing::instrument(name = "rw_try_write", level = "debug", skip_all, fields(lock = %self.name))]
    pub async fn try_write(&self, opts: &LockOptions) -> Result<Guard> {
        if self.native() {
            return self
                .store
                .try_acquire_as(self.name.as_str(), opts, Kind::Writer)
                .await;
        }
        let mut tries = 0;
        loop {
            let writer = self.store.try_acquire(&self.name, opts).await?;
            let drained = self.drain(opts, false).await;
            match Self::writer_once(writer, drained).await {
                // As in `write`; a store that keeps stalling ends it.
                Err(Error::Lost { .. }) if tries < 2 => tries += 1,
                other => return other,
            }
        }
    }

    /// Turns a plain hold of `NAME` (for example one lock of a
    /// [`MultiGuard`](crate::MultiGuard)) into the write side: waits (up to
    /// the options' wait) until no reader holds the lock. [`Error::InvalidArgument`]
    /// when `held` is not this lock's name; [`Error::Lost`] when `held`
    /// ran out while the readers drained (readers may have got in). On a
    /// native store a plain hold already waited for the readers ahead of it
    /// and keeps lockward's readers out (but not other clients' readers,
    /// such as Curator's).
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
        self.drain(opts, true).await?;
        // Readers may have got in if `held` ran out meanwhile.
        match held.lost_reason() {
            Some(reason) => Err(Error::Lost {
                name: self.name.to_string(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// How many readers hold the lock now, where the lock is built on a
    /// semaphore (one read of the readers' ledger and a look at each
    /// reader's slot); [`Error::NotSupported`] on a native store.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
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
    ///
    /// [`Error::Lost`] (the permit given back) when `gate` was not held
    /// until the permit was taken: a writer that got `NAME` meanwhile may
    /// have counted the readers before this one, and would write beside it.
    async fn admit_reader(&self, gate: Guard, opts: &LockOptions) -> Result<ReadGuard> {
        let fence = gate.fence();
        let permit = self.readers.try_acquire(opts).await;
        // The owner-checked release says whether `gate` was still ours
        // (locally and on the store) after the permit was taken. Another
        // failure (a store that does not answer) came after the local
        // check passed, which is enough.
        let gate_lost = match gate.release().await {
            Err(Error::Lost { reason, .. }) => Some(reason),
            _ => None,
        };
        let permit = permit?;
        if let Some(reason) = gate_lost {
            let _ = permit.release().await;
            return Err(Error::Lost {
                name: self.name.to_string(),
                reason,
            });
        }
        Ok(ReadGuard {
            hold: ReadHold::Permit(permit),
            fence,
            name: self.name.clone(),
        })
    }

    /// `writer` as the write side once the readers `drained` and while it
    /// is still held; released otherwise ([`Error::Lost`] when it ran out
    /// meanwhile: readers may have got in).
    async fn writer_once(writer: Guard, drained: Result<()>) -> Result<Guard> {
        let drained = drained.and_then(|()| match writer.lost_reason() {
            Some(reason) => Err(Error::Lost {
                name: writer.name().to_string(),
                reason,
            }),
            None => Ok(()),
        });
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

    /// Resolves when the reader's lease is lost.
    ///
    /// Cancellation: cancel-safe.
    pub async fn lost(&self) -> LostReason {
        self.guard().lost().await
    }

    /// Gives the read side back.
    ///
    /// Cancellation: as for [`Permit::release`].
    pub async fn release(self) -> Result<()> {
        match self.hold {
            ReadHold::Permit(permit) => permit.release().await,
            ReadHold::Native(guard) => guard.release().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ends `name`'s current holder, as an operator's forced unlock does:
    /// the lease runs out under its owner.
    async fn end_holder(store: &Store, name: &str) {
        let holder = store.inspect(name).await.unwrap().expect("held");
        store.force_unlock(name, &holder).await.unwrap();
    }

    #[tokio::test]
    async fn a_reader_whose_pass_ran_out_gives_its_permit_back() {
        let store = Store::memory();
        let lock = RwLock::new(store.clone(), "gate").unwrap();
        let opts = LockOptions::new();
        let gate = store.acquire("gate", &opts).await.unwrap();
        end_holder(&store, "gate").await;
        let admitted = lock.admit_reader(gate, &opts).await;
        assert!(matches!(admitted, Err(Error::Lost { .. })), "{admitted:?}");
        assert_eq!(lock.readers().await.unwrap(), 0);
        // Whole reads still work, and take the permit.
        let reader = lock.read(&opts).await.unwrap();
        assert_eq!(lock.readers().await.unwrap(), 1);
        reader.release().await.unwrap();
    }

    #[tokio::test]
    async fn a_writer_that_ran_out_while_readers_drained_is_let_go() {
        let store = Store::memory();
        // Unrenewed and slept past: a writer paused beyond its TTL.
        let short = LockOptions::new()
            .ttl(std::time::Duration::from_millis(50))
            .renewal(crate::Renewal::Off);
        let writer = store.acquire("gate", &short).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(80)).await;
        let written = RwLock::writer_once(writer, Ok(())).await;
        assert!(matches!(written, Err(Error::Lost { .. })), "{written:?}");
        assert!(store.inspect("gate").await.unwrap().is_none());
        // The same for a plain hold turned into the write side.
        let lock = RwLock::new(store.clone(), "gate").unwrap();
        let held = store.acquire("gate", &short).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(80)).await;
        let excluded = lock.exclude_readers(&held, &short).await;
        assert!(matches!(excluded, Err(Error::Lost { .. })), "{excluded:?}");
        // A writer in time is the write side.
        let opts = LockOptions::new();
        let writer = lock.write(&opts).await.unwrap();
        assert!(lock.exclude_readers(&writer, &opts).await.is_ok());
        writer.release().await.unwrap();
    }
}
