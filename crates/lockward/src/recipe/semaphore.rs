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
//!   (Redis, PostgreSQL lease mode, etcd, ZooKeeper in Curator's layout):
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

use crate::backend::wait::Backoff;
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::name::Name;
use crate::options::LockOptions;
use crate::store::Store;

/// The most permits one semaphore may have.
pub const MAX_PERMITS: u32 = 1_000_000_000;

/// The most holders at once on a store that keeps the semaphore in a
/// ledger, which lists each one (no limit where the store keeps it
/// natively).
pub const MAX_HOLDERS: u32 = 4_096;

/// How long the ledger is kept after its last change.
const LEDGER_KEEP: Duration = Duration::from_secs(30 * 24 * 3600);

/// How often a write of the ledger may meet a conflicting one before the
/// caller is told the semaphore is contended.
const WRITE_TRIES: u32 = 1_000;

/// N leased permits on one name.
#[derive(Debug, Clone)]
pub struct Semaphore {
    store: Store,
    /// The store's semaphore holders, where it keeps them natively.
    native: Option<Store>,
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

    /// Gives the permits back. Cancelling it may leave the ledger entry,
    /// which is dropped when the semaphore next runs short.
    pub async fn release(self) -> Result<()> {
        let released = self.guard.release().await;
        if let Some(slot) = self.slot {
            self.semaphore.forget(slot).await?;
        }
        released
    }
}

/// One line of the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    slot: u32,
    permits: u32,
}

/// The ledger as read: its entries and the version to write against.
struct Ledger {
    entries: Vec<Entry>,
    version: u64,
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
            native: store.permit_holds(),
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
        self.native.is_some()
    }

    /// How many permits there are.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// How many permits are held now, by holders whose lease is live: one
    /// read where the store keeps the semaphore natively; else one read of
    /// the ledger and one look at each holder's slot. Cancelling it changes
    /// nothing.
    pub async fn held(&self) -> Result<u32> {
        if let (Some(_), Some(seam)) = (&self.native, self.store.backend().permits()) {
            let held = seam.permits_held(&Name::new(&self.name)?).await?;
            return Ok(u32::try_from(held).unwrap_or(u32::MAX));
        }
        let ledger = self.read().await?;
        let mut held = 0u64;
        for entry in ledger.entries {
            if self
                .store
                .inspect(self.slot_name(entry.slot))
                .await?
                .is_some()
            {
                held += u64::from(entry.permits);
            }
        }
        Ok(u32::try_from(held).unwrap_or(u32::MAX))
    }

    /// Takes one permit if it is free, else fails at once with
    /// [`Error::NoPermits`].
    pub async fn try_acquire(&self, opts: &LockOptions) -> Result<Permit> {
        self.try_acquire_many(1, opts).await
    }

    /// Takes `k` permits at once if they are free, else fails at once with
    /// [`Error::NoPermits`], which says how many are free. Cancelling it may
    /// leave a slot lock, which expires.
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
    /// ([`Error::TimedOut`] then). Drop the future to cancel the wait.
    pub async fn acquire(&self, opts: &LockOptions) -> Result<Permit> {
        self.acquire_many(1, opts).await
    }

    /// Takes `k` permits at once, waiting in line up to the options' wait
    /// limit ([`Error::TimedOut`] then). Drop the future to cancel the
    /// wait; the place in line is given up with it.
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
    /// semaphore natively. Cancelling it leaves the entry, which is dropped
    /// when the semaphore next runs short.
    pub async fn forget(&self, slot: u32) -> Result<()> {
        if self.native.is_some() {
            return Ok(());
        }
        for _ in 0..WRITE_TRIES {
            let ledger = self.read().await?;
            if !ledger.entries.iter().any(|e| e.slot == slot) {
                return Ok(());
            }
            if self.store.inspect(self.slot_name(slot)).await?.is_some() {
                // A new holder took the slot (and wrote its own entry).
                return Ok(());
            }
            let kept: Vec<Entry> = ledger
                .entries
                .into_iter()
                .filter(|e| e.slot != slot)
                .collect();
            if self.write(&kept, ledger.version).await? {
                return Ok(());
            }
            tokio::task::yield_now().await;
        }
        Err(self.contended())
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
        match &self.native {
            Some(holds) => self.admit_natively(holds, k, opts).await,
            None => self.admit_in_ledger(k, opts).await,
        }
    }

    /// One admission by the store itself, in one atomic step.
    async fn admit_natively(&self, holds: &Store, k: u32, opts: &LockOptions) -> Result<Admission> {
        let kind = Kind::Permits {
            of: self.permits,
            take: k,
        };
        match holds.try_acquire_as(&self.name, opts, kind).await {
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

    /// One admission through the ledger.
    async fn admit_in_ledger(&self, k: u32, opts: &LockOptions) -> Result<Admission> {
        // The slot we hold, once taken; kept across ledger conflicts.
        let mut taken: Option<(u32, Guard)> = None;
        for _ in 0..WRITE_TRIES {
            let ledger = self.read().await?;
            let mut entries = ledger.entries;
            if let Some((slot, _)) = &taken {
                // We hold its lock, so any entry listing it is a gone holder's.
                entries.retain(|e| e.slot != *slot);
            }
            if self.refusal(&entries, k).is_some() {
                entries = self.live(entries).await?;
                if let Some(why) = self.refusal(&entries, k) {
                    if let Some((_, guard)) = taken {
                        let _ = guard.release().await;
                    }
                    return Ok(Admission::Refused(why));
                }
            }
            let (slot, guard) = match taken.take() {
                Some(held) => held,
                None => {
                    let slot = lowest_free_slot(&entries);
                    match self.store.try_acquire(self.slot_name(slot), opts).await {
                        Ok(guard) => (slot, guard),
                        // Another holder took it since we read: read again.
                        Err(Error::Busy { .. }) => continue,
                        Err(e) => return Err(e),
                    }
                }
            };
            entries.push(Entry { slot, permits: k });
            if self.write(&entries, ledger.version).await? {
                tracing::Span::current().record("slot", slot);
                return Ok(Admission::Granted(Box::new(Permit {
                    guard,
                    slot: Some(slot),
                    permits: k,
                    semaphore: self.clone(),
                    _counted: PermitGauge::start(&self.name, k),
                })));
            }
            taken = Some((slot, guard));
            tokio::task::yield_now().await;
        }
        if let Some((_, guard)) = taken {
            let _ = guard.release().await;
        }
        Err(self.contended())
    }

    /// Why `k` more permits do not fit beside `entries`; `None` when they do.
    fn refusal(&self, entries: &[Entry], k: u32) -> Option<String> {
        let used: u64 = entries.iter().map(|e| u64::from(e.permits)).sum();
        let free = u64::from(self.permits).saturating_sub(used);
        if u64::from(k) > free {
            return Some(crate::backend::wanted(k, free, self.permits));
        }
        if entries.len() >= MAX_HOLDERS as usize {
            return Some(format!(
                "it has {MAX_HOLDERS} holders, the most one semaphore lists at once \
                 ({free} of {} permits free); take several permits per holder",
                self.permits
            ));
        }
        None
    }

    /// The entries whose slot lock is held.
    async fn live(&self, entries: Vec<Entry>) -> Result<Vec<Entry>> {
        let mut live = Vec::with_capacity(entries.len());
        for entry in entries {
            if self
                .store
                .inspect(self.slot_name(entry.slot))
                .await?
                .is_some()
            {
                live.push(entry);
            }
        }
        Ok(live)
    }

    async fn read(&self) -> Result<Ledger> {
        let Some(record) = self.store.read_versioned(&self.ledger_name()).await? else {
            return Ok(Ledger {
                entries: Vec::new(),
                version: 0,
            });
        };
        let entries = parse(&record.value).ok_or_else(|| Error::Protocol {
            address: self.store.address(),
            message: format!(
                "the ledger {} holds a value that lockward did not write; it was left untouched",
                self.ledger_name()
            ),
        })?;
        Ok(Ledger {
            entries,
            version: record.version,
        })
    }

    /// Writes `entries` if the ledger is still at `version`.
    async fn write(&self, entries: &[Entry], version: u64) -> Result<bool> {
        let value = render(entries);
        Ok(self
            .store
            .write_versioned(&self.ledger_name(), version, &value, LEDGER_KEEP)
            .await?
            .is_some())
    }

    fn contended(&self) -> Error {
        Error::Contended {
            key: self.ledger_name(),
            tries: WRITE_TRIES,
        }
    }
}

/// What one admission came to.
enum Admission {
    Granted(Box<Permit>),
    /// Why the permits do not fit now.
    Refused(String),
}

/// The lowest slot number no entry lists.
fn lowest_free_slot(entries: &[Entry]) -> u32 {
    let mut used: Vec<u32> = entries.iter().map(|e| e.slot).collect();
    used.sort_unstable();
    let mut slot = 0;
    for u in used {
        if u == slot {
            slot += 1;
        } else if u > slot {
            break;
        }
    }
    slot
}

fn parse(value: &str) -> Option<Vec<Entry>> {
    value
        .lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (slot, permits) = line.split_once(' ')?;
            Some(Entry {
                slot: slot.parse().ok().filter(|s| *s < MAX_HOLDERS)?,
                permits: permits.parse().ok().filter(|p| *p > 0)?,
            })
        })
        .collect()
}

fn render(entries: &[Entry]) -> String {
    let mut out = String::with_capacity(entries.len() * 12);
    for e in entries {
        out.push_str(&format!("{} {}\n", e.slot, e.permits));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holders(n: u32, each: u32) -> Vec<Entry> {
        (0..n)
            .map(|slot| Entry {
                slot,
                permits: each,
            })
            .collect()
    }

    #[test]
    fn a_refusal_says_what_is_free() {
        let sem = Semaphore::new(Store::memory(), "pool", 1_000_000).unwrap();
        assert_eq!(sem.refusal(&holders(10, 1), 5), None);
        assert_eq!(
            sem.refusal(&holders(2, 500_000), 1).as_deref(),
            Some("1 wanted, 0 of 1000000 free")
        );
        // Permits to spare, but no room to list one more holder.
        let full = sem.refusal(&holders(MAX_HOLDERS, 1), 1).unwrap();
        assert!(full.contains("4096 holders"), "{full}");
        assert!(full.contains("995904 of 1000000 permits free"), "{full}");
    }

    #[test]
    fn the_ledger_round_trips_and_refuses_foreign_text() {
        let entries = vec![
            Entry {
                slot: 0,
                permits: 60_000,
            },
            Entry {
                slot: 3,
                permits: 1,
            },
        ];
        assert_eq!(parse(&render(&entries)), Some(entries.clone()));
        assert_eq!(parse(""), Some(vec![]));
        assert_eq!(parse("banana"), None);
        assert_eq!(parse("1 0\n"), None);
        assert_eq!(parse("99999 1\n"), None);
        assert_eq!(lowest_free_slot(&entries), 1);
        assert_eq!(lowest_free_slot(&[]), 0);
    }
}
