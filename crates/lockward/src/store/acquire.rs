//! Taking a lock: the try and the wait of every kind of hold, the guard a
//! grant becomes, and the clean-up of an acquisition cancelled in flight.

use std::sync::Arc;
use std::time::Instant;

use super::Store;
use crate::backend::{Attempt, Grant, Hold, Kind, Request};
use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::lease::{delayed_deadline, Lease};
use crate::metrics;
use crate::name::Name;
use crate::options::LockOptions;
use crate::owner::OwnerId;
use crate::renewer::Renewer;

impl Store {
    /// Takes the lock if it is free, else fails at once with [`Error::Busy`].
    ///
    /// Cancellation: dropping the future leaves no holder behind: a grant in
    /// flight is released in the background.
    pub async fn try_acquire(&self, name: impl AsRef<str>, opts: &LockOptions) -> Result<Guard> {
        self.try_acquire_as(name.as_ref(), opts, Kind::Mutex).await
    }

    /// [`try_acquire`](Store::try_acquire) of a kind of hold; only a store
    /// with native read-write locks gets more than [`Kind::Mutex`].
    #[tracing::instrument(name = "try_acquire", level = "debug", skip_all,
        fields(lock = %name, store = self.scheme, ?kind, fence))]
    pub(crate) async fn try_acquire_as(
        &self,
        name: &str,
        opts: &LockOptions,
        kind: Kind,
    ) -> Result<Guard> {
        let name = Name::new(name)?;
        self.check(opts)?;
        let owner = owner_for(opts);
        let started = Instant::now();
        let req = request(&name, owner, opts, kind);
        let in_flight = InFlight::new(self.hold(kind), &name, owner);
        let attempt = self.attempt(&req).await;
        in_flight.finished();
        let outcome = match &attempt {
            Ok(Attempt::Granted { .. }) => "granted",
            Ok(Attempt::Held { .. }) | Err(Error::NoPermits { .. }) => "busy",
            Err(_) => "error",
        };
        metrics::acquisition(self.scheme, outcome, started.elapsed());
        tracing::debug!(outcome, "tried");
        match attempt? {
            Attempt::Granted { fence } => {
                self.refuse_fence_gone_back(kind, &name, owner, fence)
                    .await?;
                Ok(self.guard(kind, name, owner, fence, started, opts))
            }
            Attempt::Held { .. } => Err(Error::Busy {
                name: name.to_string(),
            }),
        }
    }

    /// Takes the lock, waiting for it up to the options' wait limit
    /// ([`Error::TimedOut`] then).
    ///
    /// Cancellation: dropping the future ends the wait, leaves this process's
    /// line, and leaves no holder behind: a grant in flight is released in the
    /// background.
    pub async fn acquire(&self, name: impl AsRef<str>, opts: &LockOptions) -> Result<Guard> {
        self.acquire_as(name.as_ref(), opts, Kind::Mutex).await
    }

    /// [`acquire`](Store::acquire) of a kind of hold; only a store with
    /// native read-write locks gets more than [`Kind::Mutex`].
    #[tracing::instrument(name = "acquire", level = "debug", skip_all,
        fields(lock = %name, store = self.scheme, ?kind, fence))]
    pub(crate) async fn acquire_as(
        &self,
        name: &str,
        opts: &LockOptions,
        kind: Kind,
    ) -> Result<Guard> {
        let name = Name::new(name)?;
        self.check(opts)?;
        let owner = owner_for(opts);
        let began = Instant::now();
        let deadline = opts.wait.map(|w| began + w);
        let req = request(&name, owner, opts, kind);
        let timed_out = || Error::TimedOut {
            name: name.to_string(),
            waited: began.elapsed(),
        };
        let waiting = metrics::Waiting::start(self.scheme);
        // Our turn among this process's waiters; held only while waiting.
        let Some(_turn) = self.lines.turn(&name, deadline).await else {
            metrics::acquisition(self.scheme, "timed_out", began.elapsed());
            return Err(timed_out());
        };
        let in_flight = InFlight::new(self.hold(kind), &name, owner);
        let grant = match kind {
            // A native semaphore keeps its own line: one take, no wait.
            Kind::Permits { .. } => self.attempt(&req).await.map(|attempt| match attempt {
                Attempt::Granted { fence } => Some(Grant {
                    fence,
                    started: began,
                }),
                Attempt::Held { .. } => None,
            }),
            _ => self.backend.acquire(&req, deadline).await,
        };
        in_flight.finished();
        drop(waiting);
        let outcome = match &grant {
            Ok(Some(_)) => "granted",
            Ok(None) => "timed_out",
            Err(_) => "error",
        };
        metrics::acquisition(self.scheme, outcome, began.elapsed());
        tracing::debug!(
            outcome,
            waited_ms = began.elapsed().as_millis() as u64,
            "acquired"
        );
        match grant? {
            Some(grant) => {
                self.refuse_fence_gone_back(kind, &name, owner, grant.fence)
                    .await?;
                Ok(self.guard(kind, name.clone(), owner, grant.fence, grant.started, opts))
            }
            None => Err(timed_out()),
        }
    }

    /// The options checked, and possible on this store.
    fn check(&self, opts: &LockOptions) -> Result<()> {
        opts.validate()?;
        if !opts.lock_delay.is_zero() && !self.capabilities().lock_delay() {
            return Err(Error::NotSupported {
                address: self.address(),
                what: "a lock-delay",
                why: "this store frees a lock the moment its holder's session ends, so it \
                      cannot hold the name back; use a store that frees locks by time",
            });
        }
        Ok(())
    }

    /// One try of `req`: at a lock (or a reader's share) through the lock
    /// seam, at permits through the semaphore seam.
    async fn attempt(&self, req: &Request<'_>) -> Result<Attempt> {
        let Kind::Permits { of, take } = req.kind else {
            return self.backend.try_acquire(req).await;
        };
        let Some(permits) = self.backend.permits() else {
            return Err(Error::NotSupported {
                address: self.address(),
                what: "a native semaphore",
                why: "this store keeps semaphores in a ledger record",
            });
        };
        let fence = permits.take_permits(req, of, take).await?;
        Ok(Attempt::Granted { fence })
    }

    /// Gives back an exclusive grant whose fence is not above one this
    /// handle saw granted for `name` before, and says why: the store went
    /// back, and a paused holder may carry that fence. (Readers and
    /// permits share a name, so their grants may arrive out of order.)
    ///
    /// Cancellation: dropping the future may leave the grant held until
    /// its TTL.
    async fn refuse_fence_gone_back(
        &self,
        kind: Kind,
        name: &Name,
        owner: OwnerId,
        fence: u64,
    ) -> Result<()> {
        if !matches!(kind, Kind::Mutex | Kind::Writer) {
            return Ok(());
        }
        let Err(seen) = self.fences_seen.record(name, fence) else {
            return Ok(());
        };
        metrics::fence_went_back(self.scheme);
        tracing::error!(lock = %name, fence, seen, "the store granted a fence not above one granted before");
        let _ = self.hold(kind).release(name, owner).await;
        Err(Error::Protocol {
            address: self.address(),
            message: format!(
                "{:?} was granted with fence {fence}, not above fence {seen} granted for it \
                 before: the store went back (restored from an older backup, or its counter \
                 was reset); the grant was given back, so no two holders share a fence",
                name.as_str()
            ),
            cause: None,
        })
    }

    /// What a guard of `kind` renews and releases through.
    fn hold(&self, kind: Kind) -> &Arc<dyn Hold> {
        match kind {
            Kind::Permits { .. } => &self.permit_hold,
            _ => &self.lock_hold,
        }
    }

    fn guard(
        &self,
        kind: Kind,
        name: Name,
        owner: OwnerId,
        fence: u64,
        started: Instant,
        opts: &LockOptions,
    ) -> Guard {
        // Called inside the acquisition's span.
        tracing::Span::current().record("fence", fence);
        let lease = Lease {
            name,
            owner,
            fence,
            ttl: opts.ttl,
            deadline: delayed_deadline(started, opts.ttl, opts.lock_delay),
        };
        let renewal = opts.renew_interval().map(|every| {
            let mut slot = self.renewer.lock().unwrap_or_else(|p| p.into_inner());
            let renewer = match slot.as_ref().filter(|r| !r.is_stopped()) {
                Some(r) => r.clone(),
                None => {
                    let r = Arc::new(Renewer::start(self.scheme));
                    *slot = Some(r.clone());
                    r
                }
            };
            (every, renewer)
        });
        Guard::new(
            self.hold(kind).clone(),
            self.scheme,
            lease,
            opts.lock_delay,
            renewal,
        )
    }
}

/// A fresh owner for one acquisition, marked when it asks for a lock-delay
/// so that a forced unlock holds the name back (see [`Store::force_unlock`]).
fn owner_for(opts: &LockOptions) -> OwnerId {
    if opts.lock_delay.is_zero() {
        OwnerId::random()
    } else {
        OwnerId::random_with_lock_delay()
    }
}

fn request<'a>(name: &'a Name, owner: OwnerId, opts: &'a LockOptions, kind: Kind) -> Request<'a> {
    Request {
        name,
        owner,
        // The store keeps it through the lock-delay (see LockOptions::lock_delay).
        ttl: opts.ttl + opts.lock_delay,
        label: opts.label.as_deref(),
        kind,
    }
}

/// A backend call that may grant a lock. If the caller drops it before it
/// returns (a cancelled or timed-out wait), the request may still land on
/// the store; this then releases the owner's lock in the background, after
/// the request on the same connection, so a cancelled acquisition never
/// leaves a lock behind until its TTL.
struct InFlight {
    cleanup: Option<(Arc<dyn Hold>, Name, OwnerId)>,
}

impl InFlight {
    fn new(hold: &Arc<dyn Hold>, name: &Name, owner: OwnerId) -> InFlight {
        InFlight {
            cleanup: Some((hold.clone(), name.clone(), owner)),
        }
    }

    /// The call returned: its outcome is known, nothing to clean up.
    fn finished(mut self) {
        self.cleanup = None;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Some((hold, name, owner)) = self.cleanup.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = hold.release(&name, owner).await;
            });
        }
    }
}
