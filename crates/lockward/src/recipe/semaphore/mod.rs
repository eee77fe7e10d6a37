//! A counting semaphore: up to a billion permits on one name, taken one or
//! several at a time (weighted), across processes and hosts, on every
//! backend.
//!
//! Each holder has its own lease, renewal, fence and `lost()` signal, and a
//! crashed holder's permits come back after its TTL. Where they are kept
//! depends on the store:
//!
//! - **Natively** where the store declares
//!   [`Capabilities::native_semaphore`](crate::Capabilities::native_semaphore)
//!   (see the table there; on ZooKeeper in Curator's layout):
//!   the store keeps an entry per holder
//!   and the count of taken permits beside them, and takes or refuses
//!   permits in one atomic step, so a permit costs the same with 20,000
//!   holders as with none, and holders are not limited in number.
//! - **In a ledger** elsewhere: each acquisition holds a lock on a *slot*,
//!   `NAME#permit/SLOT`, and one versioned record, the ledger
//!   (`NAME#permits`), lists `SLOT PERMITS` per holder (at most
//!   [`MAX_HOLDERS`]). Taking `k` permits: read the ledger; take the lowest
//!   slot it does not list; then write the ledger with the holder added,
//!   compare-and-set on the version read, so two holders never both fit in
//!   the same room. A holder takes its slot before it is listed, so a
//!   listed slot whose lock is free belongs to a holder that is gone: when
//!   the permits do not fit, the slots are looked at and such entries
//!   dropped, which is how a crashed holder's permits come back.
//!
//! Fences: natively, each admission draws a larger one than every earlier
//! admission to the semaphore; in a ledger a holder's fence is its slot
//! lock's, larger than every earlier one *of that slot*, so holders on
//! different slots may show the same number (key fences by
//! [`Permit::holder`] there).
//!
//! Waiting: waiters line up on the lock `NAME#line` (in order where the
//! store queues waiters, with pushed wake-ups where it has them); the first
//! in line tries again with backoff until its permits fit, so a large
//! request is not overtaken by small ones behind it.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use lockward::recipe::Semaphore;
//! let store = lockward::Store::memory();
//! let pool = Semaphore::new(store, "db-connections", 100)?;
//! let opts = lockward::LockOptions::new();
//! let batch = pool.try_acquire_many(60, &opts).await?;
//! assert!(pool.try_acquire_many(50, &opts).await.is_err()); // 40 left
//! let one = pool.try_acquire(&opts).await?;
//! assert_eq!(pool.held().await?, 61);
//! batch.release().await?;
//! # drop(one);
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```

use std::time::{Duration, Instant};

use crate::backend::recheck::Backoff;
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::name::Name;
use crate::options::LockOptions;
use crate::store::Store;

/// The most permits one semaphore may have.
pub const MAX_PERMITS: u32 = 1_000_000_000;

mod ledger;

pub use ledger::MAX_HOLDERS;

/// N leased permits on one name.
#[derive(Debug, Clone)]
pub struct Semaphore {
    store: Store,
    /// Whether the store keeps the semaphore's holders natively.
    native: bool,
    name: String,
    permits: u32,
}

/// Permits held by one holder: a held lock on its slot, or the store's
/// entry of the holder where it keeps the semaphore natively.
#[derive(Debug)]
pub struct Permit {
    guard: Guard,
    /// `None` where the store keeps the semaphore natively.
    slot: Option<u32>,
    permits: u32,
    semaphore: Semaphore,
    /// Counts the permits in `lockward_semaphore_permits_held` while held.
    _counted: PermitGauge,
}

/// `k` permits of a semaphore in `lockward_semaphore_permits_held`, until
/// dropped (the permit released, dropped or turned into a guard).
#[derive(Debug)]
struct PermitGauge(String, u32);

impl PermitGauge {
    fn start(semaphore: &str, k: u32) -> PermitGauge {
        crate::metrics::permits(semaphore, f64::from(k));
        PermitGauge(semaphore.to_string(), k)
    }
}

impl Drop for PermitGauge {
    fn drop(&mut self) {
        crate::metrics::permits(&self.0, -f64::from(self.1));
    }
}

impl Permit {
    /// The holder's slot (0-based, at most as many slots as holders) on a
    /// store that keeps the semaphore in a ledger; `None` where the store
    /// keeps it natively.
    pub fn slot(&self) -> Option<u32> {
        self.slot
    }

    /// Who holds, unique among the semaphore's holders at once: the slot
    /// number in a ledger, else the holder's owner id (hex).
    pub fn holder(&self) -> String {
        match self.slot {
            Some(slot) => slot.to_string(),
            None => self.guard.lease().owner.to_string(),
        }
    }

    /// How many permits this holder took.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The slot's lock: its fence, deadline and `lost()` signal.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The holder's lease itself, to hand on as a guard. Releasing the
    /// guard gives the permits back at once where the store keeps the
    /// semaphore natively; with a ledger, it frees them when the semaphore
    /// next runs short, and [`Semaphore::forget`] with the slot afterwards
    /// frees them at once.
    pub fn into_guard(self) -> Guard {
        self.guard
    }

    /// Gives the permits back.
    ///
    /// Cancellation: it may leave the ledger entry, which is dropped when
    /// the semaphore next runs short.
    pub async fn release(self) -> Result<()> {
        let released = self.guard.release().await;
        if let Some(slot) = self.slot {
            self.semaphore.forget(slot).await?;
        }
        released
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
            native: store.backend().permits().is_some(),
            store,
            name,
            permits,
        };
        Name::new(semaphore.slot_name(MAX_HOLDERS - 1))?;
        Name::new(semaphore.line_name())?;
        Name::new(semaphore.ledger_name())?;
        Ok(semaphore)
    }

    /// The lock name of slot `i`.
    pub fn slot_name(&self, i: u32) -> String {
        format!("{}#permit/{i}", self.name)
    }

    fn ledger_name(&self) -> String {
        format!("{}#permits", self.name)
    }

    fn line_name(&self) -> String {
        format!("{}#line", self.name)
    }

    /// Whether the store keeps this semaphore itself
    /// ([`Capabilities::native_semaphore`](crate::Capabilities::native_semaphore)),
    /// rather than in a ledger record.
    pub fn is_native(&self) -> bool {
        self.native
    }

    /// How many permits there are.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// How many permits are held now, by holders whose lease is live: one
    /// read where the store keeps the semaphore natively; else one read of
    /// the ledger and one look at each holder's slot.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn held(&self) -> Result<u32> {
        if let Some(seam) = self.store.backend().permits().filter(|_| self.native) {
            let held = seam.permits_held(&Name::new(&self.name)?).await?;
            return Ok(u32::try_from(held).unwrap_or(u32::MAX));
        }
        self.held_in_ledger().await
    }

    /// Takes one permit if it is free, else fails at once with
    /// [`Error::NoPermits`].
    ///
    /// Cancellation: dropping the future leaves no holder behind: a permit
    /// granted at that moment is given back in the background, or lapses at its
    /// TTL.
    pub async fn try_acquire(&self, opts: &LockOptions) -> Result<Permit> {
        self.try_acquire_many(1, opts).await
    }

    /// Takes `k` permits at once if they are free, else fails at once with
    /// [`Error::NoPermits`], which says how many are free.
    ///
    /// Cancellation: it may leave a slot lock, which expires.
    #[tracing::instrument(level = "debug", skip_all, fields(semaphore = %self.name, k, slot))]
    pub async fn try_acquire_many(&self, k: u32, opts: &LockOptions) -> Result<Permit> {
        self.check_count(k)?;
        opts.validate()?;
        match self.admit(k, opts).await? {
            Admission::Granted(permit) => Ok(*permit),
            Admission::Refused(why) => Err(Error::NoPermits {
                name: self.name.clone(),
                why,
            }),
        }
    }

    /// Takes one permit, waiting up to the options' wait limit
    /// ([`Error::TimedOut`] then).
    ///
    /// Cancellation: dropping the future ends the wait and leaves no holder
    /// behind, as for [`try_acquire`](Self::try_acquire).
    pub async fn acquire(&self, opts: &LockOptions) -> Result<Permit> {
        self.acquire_many(1, opts).await
    }

    /// Takes `k` permits at once, waiting in line up to the options' wait
    /// limit ([`Error::TimedOut`] then).
    ///
    /// Cancellation: as for [`acquire`](Self::acquire); the place in line is
    /// given up with the wait.
    #[tracing::instrument(level = "debug", skip_all, fields(semaphore = %self.name, k, slot))]
    pub async fn acquire_many(&self, k: u32, opts: &LockOptions) -> Result<Permit> {
        self.check_count(k)?;
        opts.validate()?;
        let began = Instant::now();
        if let Admission::Granted(permit) = self.admit(k, opts).await? {
            return Ok(*permit);
        }
        let timed_out = || Error::TimedOut {
            name: self.name.clone(),
            waited: began.elapsed(),
        };
        let deadline = opts.get_wait().map(|w| began + w);
        let mut line_opts = LockOptions::new().ttl(opts.get_ttl());
        if let Some(wait) = opts.get_wait() {
            line_opts = line_opts.wait(wait.saturating_sub(began.elapsed()));
        }
        // First in line: only we look at the ledger until our permits fit.
        let first = match self.store.acquire(self.line_name(), &line_opts).await {
            Ok(guard) => guard,
            Err(Error::TimedOut { .. }) => return Err(timed_out()),
            Err(e) => return Err(e),
        };
        let mut backoff = Backoff::new(Duration::from_millis(2), Duration::from_millis(100));
        let admitted = loop {
            if let Admission::Granted(permit) = self.admit(k, opts).await? {
                break Ok(*permit);
            }
            let mut pause = backoff.next_delay();
            if let Some(d) = deadline {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break Err(timed_out());
                }
                pause = pause.min(left);
            }
            tokio::time::sleep(pause).await;
        };
        let _ = first.release().await;
        admitted
    }

    /// Drops slot `slot` from the ledger, unless its lock is held again:
    /// after its permit's guard was released on its own
    /// ([`Permit::into_guard`]). Nothing to do where the store keeps the
    /// semaphore natively.
    ///
    /// Cancellation: it leaves the entry, which is dropped when the
    /// semaphore next runs short.
    pub async fn forget(&self, slot: u32) -> Result<()> {
        if self.native {
            return Ok(());
        }
        self.forget_in_ledger(slot).await
    }

    fn check_count(&self, k: u32) -> Result<()> {
        if k == 0 || k > self.permits {
            return Err(Error::invalid(
                "permits",
                format!(
                    "take 1 to {} permits of {:?}, not {k}",
                    self.permits, self.name
                ),
            ));
        }
        Ok(())
    }

    /// One admission: granted when `k` permits fit now, else why not.
    async fn admit(&self, k: u32, opts: &LockOptions) -> Result<Admission> {
        if self.native {
            self.admit_natively(k, opts).await
        } else {
            self.admit_in_ledger(k, opts).await
        }
    }

    /// One admission by the store itself, in one atomic step.
    async fn admit_natively(&self, k: u32, opts: &LockOptions) -> Result<Admission> {
        let kind = Kind::Permits {
            of: self.permits,
            take: k,
        };
        match self.store.try_acquire_as(&self.name, opts, kind).await {
            Ok(guard) => Ok(Admission::Granted(Box::new(Permit {
                guard,
                slot: None,
                permits: k,
                semaphore: self.clone(),
                _counted: PermitGauge::start(&self.name, k),
            }))),
            Err(Error::NoPermits { why, .. }) => Ok(Admission::Refused(why)),
            Err(e) => Err(e),
        }
    }
}

/// What one admission came to.
enum Admission {
    Granted(Box<Permit>),
    /// Why the permits do not fit now.
    Refused(String),
}
