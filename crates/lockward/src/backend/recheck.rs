//! Waiting for a lock by re-checking: after each pushed notification, at
//! the holder's expiry, or with jittered backoff when nothing is pushed.
//! The steps every store's wait is made of; the lock seam's default
//! `acquire` ([`acquire_by_rechecking`](super::acquire_by_rechecking)) is
//! one.

use std::time::{Duration, Instant};

use super::{Attempt, Grant, Request, Subscription};
use crate::error::{Error, Result};
use crate::name::Name;

/// First polling interval when the store cannot push notifications.
pub(crate) const POLL_MIN: Duration = Duration::from_millis(1);
/// Longest polling interval.
pub(crate) const POLL_MAX: Duration = Duration::from_millis(50);
/// With pushed wake-ups, re-check at least this often anyway, in case a
/// notification was lost with a connection.
pub(crate) const PUSHED_SAFETY_NET: Duration = Duration::from_secs(2);
/// Retry interval while the store is unreachable during a wait.
pub(crate) const OUTAGE_MIN: Duration = Duration::from_millis(20);
pub(crate) const OUTAGE_MAX: Duration = Duration::from_secs(1);
/// Re-check slightly after the holder's expiry, not exactly at it.
pub(crate) const EXPIRY_MARGIN: Duration = Duration::from_millis(1);

/// Exponential backoff with jitter: each delay is drawn from the upper half
/// of a doubling range, so pollers spread out without waiting much longer.
#[derive(Debug, Clone)]
pub struct Backoff {
    current: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at `min`, doubles up to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff { current: min, max }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let upper = self.current;
        self.current = (self.current * 2).min(self.max);
        let half = upper / 2;
        half + upper.mul_f64(fastrand::f64() * 0.5)
    }
}

/// A wait's first attempt (`attempt`, the store's non-waiting try), made
/// before subscribing to anything: `Some` when the wait is over already
/// (granted, or no time to wait).
pub(crate) async fn first_attempt(
    attempt: impl std::future::Future<Output = Result<Attempt>>,
    deadline: Option<Instant>,
) -> Result<Option<Option<Grant>>> {
    let started = Instant::now();
    if let Attempt::Granted { fence } = attempt.await? {
        return Ok(Some(Some(Grant { fence, started })));
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Ok(Some(None));
    }
    Ok(None)
}

/// Calls `attempt` until it grants the lock or `deadline` passes: after
/// each notification of `subscription`, at the holder's expiry, at least
/// every `pushed_pause` when notifications are pushed, and by jittered
/// backoff when they are not. An unreachable store is reported at once on
/// the first attempt and waited out on later ones.
pub(crate) async fn recheck_until_granted<F, Fut>(
    req: &Request<'_>,
    deadline: Option<Instant>,
    mut subscription: Subscription,
    pushed_pause: Duration,
    mut attempt: F,
) -> Result<Option<Grant>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt>>,
{
    let mut backoff = Backoff::new(POLL_MIN, POLL_MAX);
    let mut outage = Backoff::new(OUTAGE_MIN, OUTAGE_MAX);
    let mut first = true;
    loop {
        subscription.mark_seen();
        let started = Instant::now();
        let expires_in = match attempt().await {
            Ok(Attempt::Granted { fence }) => return Ok(Some(Grant { fence, started })),
            Ok(Attempt::Held { expires_in }) => {
                outage = Backoff::new(OUTAGE_MIN, OUTAGE_MAX);
                expires_in
            }
            // A store that is down when we start is reported at once; one
            // that drops while we wait (a restart, a failover) is waited
            // out, up to the caller's deadline.
            Err(e @ Error::Unavailable { .. }) if !first => {
                tracing::warn!(name = %req.name, error = %e, "store unavailable while waiting; retrying");
                Some(outage.next_delay())
            }
            Err(e) => return Err(e),
        };
        first = false;
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(None);
        }
        let mut pause = if subscription.is_pushed() {
            pushed_pause
        } else {
            backoff.next_delay()
        };
        if let Some(left) = expires_in {
            pause = pause.min(left + EXPIRY_MARGIN);
        }
        let mut wake_at = now + pause;
        if let Some(d) = deadline {
            wake_at = wake_at.min(d);
        }
        tokio::select! {
            _ = subscription.changed() => {}
            _ = tokio::time::sleep_until(wake_at.into()) => {}
        }
    }
}

/// A wait's pause while its store is unreachable (a restart, a failover):
/// says so, then sleeps the next delay of `outage`, cut at `deadline`;
/// `false` when the deadline came.
// Not every build has a store that uses it.
#[allow(dead_code)]
pub(crate) async fn wait_out_outage(
    name: &Name,
    error: &Error,
    outage: &mut Backoff,
    deadline: Option<Instant>,
) -> bool {
    tracing::warn!(%name, %error, "store unavailable while waiting; retrying");
    sleep_within(outage.next_delay(), deadline).await
}

/// Sleeps `pause`, cut at `deadline`; `false` when the deadline came.
// Not every build has a store that uses it.
#[allow(dead_code)]
pub(crate) async fn sleep_within(pause: Duration, deadline: Option<Instant>) -> bool {
    let wake = Instant::now() + pause;
    match deadline {
        Some(d) if d <= wake => {
            tokio::time::sleep_until(d.into()).await;
            false
        }
        _ => {
            tokio::time::sleep_until(wake.into()).await;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_within_bounds() {
        let mut b = Backoff::new(Duration::from_millis(1), Duration::from_millis(50));
        let delays: Vec<_> = (0..20).map(|_| b.next_delay()).collect();
        assert!(delays[0] <= Duration::from_millis(1));
        assert!(delays.iter().all(|d| *d <= Duration::from_millis(50)));
        assert!(delays[19] >= Duration::from_millis(25));
    }
}
