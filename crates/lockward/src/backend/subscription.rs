//! A waiter's subscription to a name's release notifications.

use async_trait::async_trait;

/// Notifications that a lock may have become free.
#[async_trait]
pub trait Wakeup: Send {
    /// Resolves at the next notification (possibly a spurious one).
    async fn changed(&mut self);

    /// Forgets notifications delivered so far. The waiter calls it right
    /// before each re-check, which covers them; later ones still wake it.
    /// This folds a burst (one release published on N masters) into one
    /// re-check.
    fn mark_seen(&mut self) {}
}

/// A subscription to a name's release notifications, taken *before* the
/// re-check so that a release between the two is never missed.
pub struct Subscription {
    wakeup: Option<Box<dyn Wakeup>>,
    /// Whether every release is pushed (else the waiter polls too).
    pushed: bool,
}

impl Subscription {
    /// No notifications: the waiter polls with jittered backoff.
    pub fn polling() -> Self {
        Subscription {
            wakeup: None,
            pushed: false,
        }
    }

    /// Notifications pushed by the store.
    pub fn pushed(wakeup: impl Wakeup + 'static) -> Self {
        Subscription {
            wakeup: Some(Box::new(wakeup)),
            pushed: true,
        }
    }

    /// Some releases pushed (this process's own), the others polled for:
    /// the waiter polls with backoff and also wakes at `wakeup`.
    pub fn polling_and(wakeup: impl Wakeup + 'static) -> Self {
        Subscription {
            wakeup: Some(Box::new(wakeup)),
            pushed: false,
        }
    }

    /// Whether every release is pushed (else the caller must poll).
    pub fn is_pushed(&self) -> bool {
        self.pushed
    }

    /// Forgets notifications delivered so far (see [`Wakeup::mark_seen`]).
    pub fn mark_seen(&mut self) {
        if let Some(w) = &mut self.wakeup {
            w.mark_seen();
        }
    }

    /// Waits for the next notification; never resolves without a wakeup.
    ///
    /// Cancellation: cancel-safe; a wakeup that came meanwhile is seen by the
    /// next call.
    pub async fn changed(&mut self) {
        match &mut self.wakeup {
            Some(w) => w.changed().await,
            None => std::future::pending().await,
        }
    }
}
