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
pub struct Subscription(Option<Box<dyn Wakeup>>);

impl Subscription {
    /// No notifications: the waiter polls with jittered backoff.
    pub fn polling() -> Self {
        Subscription(None)
    }

    /// Notifications pushed by the store.
    pub fn pushed(wakeup: impl Wakeup + 'static) -> Self {
        Subscription(Some(Box::new(wakeup)))
    }

    /// Whether notifications are pushed (else the caller must poll).
    pub fn is_pushed(&self) -> bool {
        self.0.is_some()
    }

    /// Forgets notifications delivered so far (see [`Wakeup::mark_seen`]).
    pub fn mark_seen(&mut self) {
        if let Some(w) = &mut self.0 {
            w.mark_seen();
        }
    }

    /// Waits for the next notification; never resolves when polling.
    ///
    /// Cancellation: cancel-safe; a wakeup that came meanwhile is seen by the
    /// next call.
    pub async fn changed(&mut self) {
        match &mut self.0 {
            Some(w) => w.changed().await,
            None => std::future::pending().await,
        }
    }
}
