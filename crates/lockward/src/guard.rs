//! A held lock with behaviour: renewal, the lost signal, release.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::backend::Hold;
use crate::error::{Error, LostReason, Result};
use crate::lease::Lease;
use crate::name::Name;
use crate::renewer::{Renewer, SharedStanding, Standing};

/// A held lock. Renews itself in the background when the options asked
/// for it, signals [`lost`](Guard::lost) as soon as it knows the lease is
/// gone, and releases best-effort when dropped; call
/// [`release`](Guard::release) to release for certain and hear about it.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = lockward::Store::memory();
/// let guard = store.try_acquire("orders/42", &Default::default()).await.unwrap();
/// assert!(guard.fence() > 0);
/// tokio::select! {
///     reason = guard.lost() => panic!("lost: {reason}"),
///     _ = async { /* the critical section, fenced with guard.fence() */ } => {}
/// }
/// guard.release().await.unwrap();
/// # });
/// ```
#[derive(Debug)]
pub struct Guard {
    /// What it holds on the store: a lock, a reader's share or permits.
    hold: Arc<dyn Hold>,
    /// The store's scheme, for metrics.
    scheme: &'static str,
    /// When it was granted, for `lockward_held_seconds`.
    held_since: Instant,
    lease: Lease,
    standing: SharedStanding,
    /// Keeps the store's renewal scheduler alive while this guard needs it.
    _renewer: Option<Arc<Renewer>>,
}

/// A cloneable handle on a guard's lost signal, usable after the guard
/// moved (for example into a `select!` beside the work it protects). A
/// [`MultiGuard`](crate::MultiGuard)'s signal watches every lock it holds:
/// its deadline is the earliest, and it fires when any one is lost.
#[derive(Debug, Clone)]
pub struct LostSignal {
    /// The standing of each lease watched.
    leases: Vec<watch::Receiver<Standing>>,
    /// A time at which it fires however the leases are renewed.
    cap: Option<Instant>,
}

impl LostSignal {
    pub(crate) fn of_all<'a>(guards: impl IntoIterator<Item = &'a Guard>) -> LostSignal {
        LostSignal {
            leases: guards.into_iter().map(|g| g.standing.subscribe()).collect(),
            cap: None,
        }
    }

    /// The same signal, also firing (as expired) at `at` however the
    /// leases are renewed: a hold limited in time by its user rather than
    /// by its TTL (a cron execution's `lock_at_most_for`).
    #[cfg_attr(not(feature = "cron"), allow(dead_code))]
    pub(crate) fn until(self, at: Instant) -> LostSignal {
        LostSignal {
            cap: Some(at),
            ..self
        }
    }

    /// The lease's current local deadline (the earliest, for several).
    pub fn deadline(&self) -> Instant {
        self.leases
            .iter()
            .map(|rx| rx.borrow().deadline)
            .chain(self.cap)
            .min()
            .unwrap_or_else(Instant::now)
    }

    /// Resolves at the next change of standing (a renewal moved the
    /// deadline, or the lease was lost or ended).
    ///
    /// Cancellation: cancel-safe; dropping the future misses nothing, the next
    /// call sees the change.
    pub async fn changed(&mut self) {
        // One future per lock, kept across polls so each stays registered.
        let mut each: Vec<Pin<Box<dyn Future<Output = bool> + Send + '_>>> = self
            .leases
            .iter_mut()
            .map(|rx| Box::pin(async move { rx.changed().await.is_ok() }) as _)
            .collect();
        std::future::poll_fn(|cx| {
            let mut at = 0;
            while at < each.len() {
                match each[at].as_mut().poll(cx) {
                    Poll::Ready(true) => return Poll::Ready(()),
                    // That guard is gone; wait on the others (or forever).
                    Poll::Ready(false) => drop(each.swap_remove(at)),
                    Poll::Pending => at += 1,
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Whether the lease is known to be gone or its deadline has passed.
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    fn lost_reason(&self) -> Option<LostReason> {
        let now = Instant::now();
        let capped = self.cap.is_some_and(|at| now >= at);
        self.leases
            .iter()
            .find_map(|rx| rx.borrow().lost_at(now))
            .or(capped.then_some(LostReason::Expired))
    }

    /// Resolves when the lease is lost: renewal refused, session ended, or
    /// the local deadline passed. Never resolves while the lease is healthy,
    /// nor after a clean release.
    ///
    /// Cancellation: cancel-safe.
    pub async fn wait(&mut self) -> LostReason {
        loop {
            for rx in &mut self.leases {
                rx.borrow_and_update();
            }
            if self.leases.iter().any(|rx| rx.borrow().ended) {
                // Let go on purpose: it will never be "lost".
                std::future::pending::<()>().await;
            }
            if let Some(reason) = self.lost_reason() {
                return reason;
            }
            let deadline = self.deadline();
            tokio::select! {
                _ = self.changed() => {}
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }
}

impl Guard {
    pub(crate) fn new(
        hold: Arc<dyn Hold>,
        scheme: &'static str,
        lease: Lease,
        lock_delay: Duration,
        renewal: Option<(Duration, Arc<Renewer>)>,
    ) -> Self {
        let (standing, _) = watch::channel(Standing {
            deadline: lease.deadline,
            ttl: lease.ttl,
            lock_delay,
            lost: None,
            ended: false,
        });
        let standing = Arc::new(standing);
        let renewer = renewal.map(|(every, renewer)| {
            renewer.register(&hold, &lease, every, &standing);
            renewer
        });
        crate::metrics::held(scheme);
        Guard {
            hold,
            scheme,
            held_since: Instant::now(),
            lease,
            standing,
            _renewer: renewer,
        }
    }

    /// The lease, with its current deadline.
    pub fn lease(&self) -> Lease {
        let standing = *self.standing.borrow();
        Lease {
            deadline: standing.deadline,
            ttl: standing.ttl,
            ..self.lease.clone()
        }
    }

    /// How long the store keeps the lock past a lapse without a release
    /// (zero unless taken with [`LockOptions::lock_delay`](crate::LockOptions::lock_delay)).
    pub fn lock_delay(&self) -> Duration {
        self.standing.borrow().lock_delay
    }

    /// Lets go without releasing: renewals stop, lost signals do not fire,
    /// and dropping the guard leaves the lock in the store until its lease
    /// and lock-delay run out. For a holder that keeps a lock on behalf of
    /// another process that stopped renewing it (as `lockward serve` does
    /// for its clients): that process may still be acting, and the
    /// lock-delay is what keeps the next holder out meanwhile.
    pub fn abandon(&self) {
        self.end();
    }

    /// The fencing token: send it with every write to the protected resource.
    pub fn fence(&self) -> u64 {
        self.lease.fence
    }

    /// The locked name.
    pub fn name(&self) -> &Name {
        &self.lease.name
    }

    /// The current local deadline: act under the lock only before it.
    pub fn deadline(&self) -> Instant {
        self.standing.borrow().deadline
    }

    /// Whether the lease is known to be lost or past its deadline.
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// Why the lease is lost, if it is known to be lost or past its
    /// deadline.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.standing.borrow().lost_at(Instant::now())
    }

    /// Resolves when the lease is lost (see [`LostSignal::wait`]).
    ///
    /// Cancellation: cancel-safe; dropping the future misses nothing, a later
    /// call sees the loss.
    pub async fn lost(&self) -> LostReason {
        self.lost_signal().wait().await
    }

    /// A handle on the lost signal that does not borrow the guard.
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal {
            leases: vec![self.standing.subscribe()],
            cap: None,
        }
    }

    /// Extends the lease to `ttl` from now (or its TTL when `None`).
    /// Fails with [`Error::Lost`] when the store no longer records us.
    ///
    /// Cancellation: the extension may or may not have reached the store; the
    /// deadline moves only when it is confirmed, so it stays safe either way.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<()> {
        let ttl = crate::duration::check_ttl(ttl.unwrap_or(self.standing.borrow().ttl))?;
        if let Some(reason) = self.standing.borrow().lost_at(Instant::now()) {
            return Err(self.lost_error(reason));
        }
        let started = Instant::now();
        let delay = self.standing.borrow().lock_delay;
        match self
            .hold
            .extend(&self.lease.name, self.lease.owner, ttl + delay)
            .await
        {
            Ok(()) => {
                self.standing.send_modify(|s| {
                    s.ttl = ttl;
                    s.deadline = s.deadline_from(started);
                });
                Ok(())
            }
            Err(Error::NotOwner { .. }) => {
                let reason = self.why_refused().await;
                let mut first = false;
                self.standing.send_modify(|s| {
                    first = s.lost.is_none();
                    s.lost = Some(reason);
                });
                if first {
                    crate::metrics::lost(self.scheme, reason);
                    tracing::warn!(lock = %self.lease.name, fence = self.lease.fence,
                        store = self.scheme, ?reason, "lease lost");
                }
                Err(self.lost_error(reason))
            }
            Err(other) => Err(other),
        }
    }

    /// Releases the lock on the store, owner-checked and atomic. Fails with
    /// [`Error::Lost`] when the lease had already ended (on the store, or
    /// locally: its deadline passed), but releases it on the store anyway:
    /// work done after the deadline may have overlapped with another holder.
    ///
    /// Cancellation: the guard is consumed; a release cut short leaves the
    /// lease to run out at its TTL (no renewal runs any more).
    #[tracing::instrument(level = "debug", skip_all,
        fields(lock = %self.lease.name, fence = self.lease.fence, store = self.scheme))]
    pub async fn release(self) -> Result<()> {
        let was_lost = self.standing.borrow().lost_at(Instant::now());
        self.end();
        let result = self.hold.release(&self.lease.name, self.lease.owner).await;
        match result {
            Err(Error::NotOwner { .. }) => {
                let reason = match was_lost {
                    Some(reason) => reason,
                    None => self.why_refused().await,
                };
                Err(self.lost_error(reason))
            }
            // Released, but after the local deadline: whatever ran after it
            // was not protected, however slow the store was to notice.
            Ok(()) if was_lost.is_some() => {
                Err(self.lost_error(was_lost.unwrap_or(LostReason::Expired)))
            }
            other => other,
        }
    }

    /// Marks the lease as let go on purpose: renewals stop, and lost
    /// signals will not fire. Returns whether it had already ended.
    fn end(&self) -> bool {
        let mut already = false;
        self.standing.send_modify(|s| {
            already = s.ended;
            s.ended = true;
        });
        if !already {
            crate::metrics::let_go(self.scheme, self.held_since.elapsed());
        }
        already
    }

    /// Why the store refused this lease (a forced unlock, or taken over).
    async fn why_refused(&self) -> LostReason {
        let lease = &self.lease;
        self.hold
            .why_refused(&lease.name, lease.owner, lease.fence)
            .await
    }

    fn lost_error(&self, reason: LostReason) -> Error {
        Error::Lost {
            name: self.lease.name.to_string(),
            reason,
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Released even when lost: the release is owner-checked, and a
        // session lock (PostgreSQL advisory) would otherwise stay held.
        if self.end() {
            return;
        }
        // Best effort: without a runtime there is nobody to send it, and the
        // TTL frees the lock anyway.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let hold = self.hold.clone();
            let name = self.lease.name.clone();
            let owner = self.lease.owner;
            runtime.spawn(async move {
                if let Err(e) = hold.release(&name, owner).await {
                    tracing::debug!(%name, error = %e, "release on drop failed");
                }
            });
        }
    }
}
