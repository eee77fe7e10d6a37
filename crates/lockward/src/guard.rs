//! A held lock with behaviour: renewal, the lost signal, release.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backend::Backend;
use crate::error::{Error, LostReason, Result};
use crate::lease::{local_deadline, Lease};
use crate::name::Name;

/// What a guard knows about its lease right now.
#[derive(Debug, Clone, Copy)]
struct Standing {
    deadline: Instant,
    ttl: Duration,
    lost: Option<LostReason>,
}

impl Standing {
    fn lost_at(&self, now: Instant) -> Option<LostReason> {
        self.lost
            .or((now >= self.deadline).then_some(LostReason::Expired))
    }
}

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
    backend: Arc<dyn Backend>,
    lease: Lease,
    standing: Arc<watch::Sender<Standing>>,
    renewer: Option<JoinHandle<()>>,
    done: bool,
}

/// A cloneable handle on a guard's lost signal, usable after the guard
/// moved (for example into a `select!` beside the work it protects).
#[derive(Debug, Clone)]
pub struct LostSignal(watch::Receiver<Standing>);

impl LostSignal {
    /// Whether the lease is known to be gone or its deadline has passed.
    pub fn is_lost(&self) -> bool {
        self.0.borrow().lost_at(Instant::now()).is_some()
    }

    /// Resolves when the lease is lost: renewal refused, session ended, or
    /// the local deadline passed. Never resolves while the lease is healthy,
    /// nor after a clean release.
    pub async fn wait(&mut self) -> LostReason {
        loop {
            let standing = *self.0.borrow_and_update();
            if let Some(reason) = standing.lost_at(Instant::now()) {
                return reason;
            }
            tokio::select! {
                changed = self.0.changed() => {
                    if changed.is_err() {
                        // The guard is gone (released or dropped): the lock
                        // was let go on purpose, so it will never be "lost".
                        std::future::pending::<()>().await;
                    }
                }
                _ = tokio::time::sleep_until(standing.deadline.into()) => {}
            }
        }
    }
}

impl Guard {
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        lease: Lease,
        renew_every: Option<Duration>,
    ) -> Self {
        let (standing, _) = watch::channel(Standing {
            deadline: lease.deadline,
            ttl: lease.ttl,
            lost: None,
        });
        let standing = Arc::new(standing);
        let renewer = renew_every.map(|every| {
            tokio::spawn(renew(
                backend.clone(),
                lease.name.clone(),
                lease.owner,
                standing.clone(),
                every,
            ))
        });
        Guard {
            backend,
            lease,
            standing,
            renewer,
            done: false,
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
        self.standing.borrow().lost_at(Instant::now()).is_some()
    }

    /// Resolves when the lease is lost (see [`LostSignal::wait`]).
    pub async fn lost(&self) -> LostReason {
        self.lost_signal().wait().await
    }

    /// A handle on the lost signal that does not borrow the guard.
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal(self.standing.subscribe())
    }

    /// Extends the lease to `ttl` from now (or its TTL when `None`).
    /// Fails with [`Error::Lost`] when the store no longer records us.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<()> {
        let ttl = crate::duration::check_ttl(ttl.unwrap_or(self.standing.borrow().ttl))?;
        if let Some(reason) = self.standing.borrow().lost_at(Instant::now()) {
            return Err(self.lost_error(reason));
        }
        let started = Instant::now();
        match self
            .backend
            .extend(&self.lease.name, self.lease.owner, ttl)
            .await
        {
            Ok(()) => {
                self.standing.send_modify(|s| {
                    s.deadline = local_deadline(started, ttl);
                    s.ttl = ttl;
                });
                Ok(())
            }
            Err(Error::NotOwner { .. }) => {
                self.standing
                    .send_modify(|s| s.lost = Some(LostReason::TakenOver));
                Err(self.lost_error(LostReason::TakenOver))
            }
            Err(other) => Err(other),
        }
    }

    /// Releases the lock on the store, owner-checked and atomic. Fails with
    /// [`Error::Lost`] when the lease had already ended: work done under it
    /// may have overlapped with another holder.
    pub async fn release(mut self) -> Result<()> {
        self.done = true;
        if let Some(task) = self.renewer.take() {
            task.abort();
        }
        let result = self
            .backend
            .release(&self.lease.name, self.lease.owner)
            .await;
        match result {
            Err(Error::NotOwner { .. }) => {
                let reason = self
                    .standing
                    .borrow()
                    .lost_at(Instant::now())
                    .unwrap_or(LostReason::TakenOver);
                Err(self.lost_error(reason))
            }
            other => other,
        }
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
        if let Some(task) = self.renewer.take() {
            task.abort();
        }
        if self.done || self.is_lost() {
            return;
        }
        // Best effort: without a runtime there is nobody to send it, and the
        // TTL frees the lock anyway.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let backend = self.backend.clone();
            let name = self.lease.name.clone();
            let owner = self.lease.owner;
            runtime.spawn(async move {
                if let Err(e) = backend.release(&name, owner).await {
                    tracing::debug!(%name, error = %e, "release on drop failed");
                }
            });
        }
    }
}

/// The renewal loop: extend every `every`; on refusal, signal lost; on a
/// transient error, retry sooner until the deadline says it is too late.
async fn renew(
    backend: Arc<dyn Backend>,
    name: Name,
    owner: crate::owner::OwnerId,
    standing: Arc<watch::Sender<Standing>>,
    every: Duration,
) {
    let mut pause = every;
    loop {
        tokio::time::sleep(pause).await;
        let current = *standing.borrow();
        if current.lost_at(Instant::now()).is_some() {
            standing.send_modify(|s| s.lost = s.lost.or(Some(LostReason::Expired)));
            return;
        }
        let started = Instant::now();
        let attempt = tokio::time::timeout_at(
            current.deadline.into(),
            backend.extend(&name, owner, current.ttl),
        )
        .await;
        match attempt {
            Ok(Ok(())) => {
                standing.send_modify(|s| s.deadline = local_deadline(started, s.ttl));
                pause = every;
            }
            Ok(Err(Error::NotOwner { .. })) => {
                standing.send_modify(|s| s.lost = Some(LostReason::TakenOver));
                return;
            }
            Ok(Err(Error::Lost { reason, .. })) => {
                standing.send_modify(|s| s.lost = Some(reason));
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(%name, error = %e, "renewal failed; retrying before the deadline");
                let left = current.deadline.saturating_duration_since(Instant::now());
                pause = (left / 4).clamp(Duration::from_millis(1), every);
            }
            Err(_) => {
                standing.send_modify(|s| s.lost = Some(LostReason::Expired));
                return;
            }
        }
    }
}
