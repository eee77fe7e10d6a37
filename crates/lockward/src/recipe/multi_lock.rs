//! Several locks taken all or nothing, in one canonical order.
//!
//! Two callers that each need `stock/a` and `stock/b` deadlock when one
//! takes `a` then waits for `b` while the other holds `b` and waits for
//! `a`. [`Store::acquire_all`] sorts the names first (by their bytes), so
//! every caller takes them in the same order whatever order it passes, and
//! nobody can hold a later name while waiting for an earlier one. All
//! callers that lock more than one of a set of names must go through it
//! (or take the names in the same sorted order) for that to hold.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::error::{Error, LostReason, Result};
use crate::guard::{Guard, LostSignal};
use crate::name::Name;
use crate::options::LockOptions;
use crate::store::Store;

/// The most names one multi-lock takes.
pub const MAX_NAMES: usize = 1024;

/// Several held locks, each with its own fence and lease, renewed like any
/// [`Guard`]; lost when any one of them is lost. Released together by
/// [`release`](MultiGuard::release), or best-effort when dropped.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = lockward::Store::memory();
/// let opts = lockward::LockOptions::new();
/// // Moving stock between two warehouses: both rows, or neither.
/// let both = store.acquire_all(["stock/b", "stock/a"], &opts).await?;
/// assert_eq!(both.names().len(), 2);
/// let fence_a = both.fence("stock/a").expect("held");
/// assert!(fence_a > 0);
/// both.release().await?;
/// # Ok::<(), lockward::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct MultiGuard {
    /// In canonical (sorted) order.
    guards: Vec<Guard>,
}

impl Store {
    /// Takes every name in `names`, waiting for each in canonical order
    /// under one overall wait limit (the options' wait, counted from this
    /// call): all of them, or none. When one cannot be had in time
    /// ([`Error::TimedOut`], naming it) or fails, those already taken are
    /// released before the error returns. Every lock gets the options' TTL,
    /// renewal and label.
    ///
    /// Names must be distinct and at most [`MAX_NAMES`]
    /// ([`Error::InvalidArgument`] otherwise, before anything is taken).
    ///
    /// Cancellation: dropping the future releases what was taken so far
    /// (in the background, as dropped guards do) and cancels the wait in
    /// progress as [`Store::acquire`] does.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn acquire_all<I, S>(&self, names: I, opts: &LockOptions) -> Result<MultiGuard>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let names = canonical(names)?;
        opts.validate()?;
        let began = Instant::now();
        let mut guards = Vec::with_capacity(names.len());
        for name in &names {
            match self.acquire(name, &opts.wait_left(began)).await {
                Ok(guard) => guards.push(guard),
                Err(e) => {
                    release_all(guards).await;
                    return Err(match e {
                        // The wait was one, over every name.
                        Error::TimedOut { name, .. } => Error::TimedOut {
                            name,
                            waited: began.elapsed(),
                        },
                        other => other,
                    });
                }
            }
        }
        Ok(MultiGuard { guards })
    }

    /// Takes every name in `names` if all are free; otherwise releases
    /// what it took and fails at once with [`Error::Busy`] naming the first
    /// held one. Input rules as for [`acquire_all`](Store::acquire_all).
    ///
    /// Cancellation: as for [`acquire_all`](Store::acquire_all).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn try_acquire_all<I, S>(&self, names: I, opts: &LockOptions) -> Result<MultiGuard>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let names = canonical(names)?;
        opts.validate()?;
        let mut guards = Vec::with_capacity(names.len());
        for name in &names {
            match self.try_acquire(name, opts).await {
                Ok(guard) => guards.push(guard),
                Err(e) => {
                    release_all(guards).await;
                    return Err(e);
                }
            }
        }
        Ok(MultiGuard { guards })
    }
}

impl MultiGuard {
    /// The held locks, in canonical (sorted) order.
    pub fn guards(&self) -> &[Guard] {
        &self.guards
    }

    /// The held names, in canonical (sorted) order.
    pub fn names(&self) -> Vec<&Name> {
        self.guards.iter().map(Guard::name).collect()
    }

    /// The fence of `name`, if this multi-lock holds it. Each name has its
    /// own fence; send each with the writes to what that name protects.
    pub fn fence(&self, name: impl AsRef<str>) -> Option<u64> {
        self.guard(name).map(Guard::fence)
    }

    /// The guard of `name`, if this multi-lock holds it.
    pub fn guard(&self, name: impl AsRef<str>) -> Option<&Guard> {
        let name = name.as_ref();
        self.guards.iter().find(|g| g.name().as_str() == name)
    }

    /// The earliest of the locks' local deadlines: act under the
    /// multi-lock only before it.
    pub fn deadline(&self) -> Instant {
        self.lost_signal().deadline()
    }

    /// Whether any of the locks is known to be lost or past its deadline.
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// The name and reason of a lock known to be lost, if any.
    pub fn lost_reason(&self) -> Option<(&Name, LostReason)> {
        self.guards
            .iter()
            .find_map(|g| g.lost_reason().map(|reason| (g.name(), reason)))
    }

    /// Resolves when any one of the locks is lost (see
    /// [`LostSignal::wait`]).
    ///
    /// Cancellation: cancel-safe.
    pub async fn lost(&self) -> LostReason {
        self.lost_signal().wait().await
    }

    /// One signal over every lock: its deadline is the earliest, and it
    /// fires when any one is lost.
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal::of_all(&self.guards)
    }

    /// Releases every lock, in reverse canonical order; each is released
    /// even when another fails. Returns the first failure (for example
    /// [`Error::Lost`] for a lock that had ended).
    ///
    /// Cancellation: dropping the future leaves the locks not yet released
    /// to be released in the background, as dropped guards are.
    pub async fn release(self) -> Result<()> {
        let mut first = None;
        for guard in self.guards.into_iter().rev() {
            if let Err(e) = guard.release().await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The guards, to release or pass on one by one.
    pub fn into_guards(self) -> Vec<Guard> {
        self.guards
    }
}

/// The names checked, distinct, and sorted.
fn canonical<I, S>(names: I) -> Result<Vec<Name>>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut sorted = BTreeSet::new();
    for name in names {
        if sorted.len() == MAX_NAMES {
            return Err(Error::invalid(
                "names",
                format!("a multi-lock takes at most {MAX_NAMES} names"),
            ));
        }
        let name = Name::new(name.as_ref())?;
        if sorted.contains(&name) {
            return Err(Error::invalid(
                "names",
                format!("\"{name}\" is asked for twice; one holder cannot take a lock twice"),
            ));
        }
        sorted.insert(name);
    }
    if sorted.is_empty() {
        return Err(Error::invalid(
            "names",
            "a multi-lock needs at least one name",
        ));
    }
    Ok(sorted.into_iter().collect())
}

/// Releases guards taken before a failure; the caller reports that failure.
async fn release_all(guards: Vec<Guard>) {
    for guard in guards.into_iter().rev() {
        let name = guard.name().clone();
        if let Err(e) = guard.release().await {
            tracing::debug!(%name, error = %e, "release after a failed multi-lock");
        }
    }
}
