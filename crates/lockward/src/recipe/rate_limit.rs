//! Rate limits shared by every instance: a fixed window (the classic `INCR`
//! and `EXPIRE`) and GCRA, a smooth limit with bursts. Both keep one
//! versioned record per subject and update it with an optimistic update
//! ([`Optimistic::apply`]), so they work on every store; each answers
//! allowed or retry-after. Under contention beyond its tries, a check fails
//! with [`Error::Contended`].
//!
//! Windows and the GCRA schedule are timed by the calling host's clock:
//! instances whose clocks differ by δ may let through up to δ's worth of
//! extra requests at a window's edge.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use std::time::Duration;
//! use lockward::recipe::{Decision, FixedWindow};
//! let limit = FixedWindow::new(lockward::Store::memory(), "api", 2, Duration::from_secs(60))?;
//! assert!(matches!(limit.check("user-7").await?, Decision::Allowed { remaining: 1 }));
//! assert!(matches!(limit.check("user-7").await?, Decision::Allowed { remaining: 0 }));
//! assert!(matches!(limit.check("user-7").await?, Decision::Limited { .. }));
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::optimistic::{Change, Optimistic};
use crate::error::{Error, Result};
use crate::name::Name;
use crate::store::Store;

/// How many compare-and-set tries one check makes under contention.
const TRIES: u32 = 32;

/// The answer to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Let it through; `remaining` more fit in the current budget.
    Allowed {
        /// Requests still allowed now.
        remaining: u64,
    },
    /// Refuse it; a request after `retry_after` would be allowed.
    Limited {
        /// How long until the next request fits.
        retry_after: Duration,
    },
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The longest window or period a rate limit takes: ten years.
pub const MAX_PERIOD: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// The most requests a rate limit counts in one window, or lets through in
/// one burst: a billion.
pub const MAX_LIMIT: u64 = 1_000_000_000;

fn check_limit(limit: u64, period: Duration) -> Result<()> {
    if limit == 0 || limit > MAX_LIMIT {
        return Err(Error::invalid(
            "limit",
            format!("a rate limit allows from 1 to {MAX_LIMIT} requests, not {limit}"),
        ));
    }
    if period < Duration::from_millis(1) || period > MAX_PERIOD {
        return Err(Error::invalid(
            "period",
            format!("a rate limit's period is from 1ms to 10 years, not {period:?}"),
        ));
    }
    Ok(())
}

/// Counts one request on the record of `key`: `step` gets the stored value
/// and the time, and returns the value to store (and for how long), or
/// `None` to store nothing, with the decision.
async fn decide<F>(store: &Store, key: &str, mut step: F) -> Result<Decision>
where
    F: FnMut(Option<&str>, u64) -> (Option<(String, Duration)>, Decision),
{
    let updates = Optimistic::new(store.clone()).tries(TRIES);
    let applied = updates
        .apply(key, |stored| match step(stored, now_ms()) {
            (Some((value, keep_for)), decision) => Change::Write {
                value,
                keep_for,
                outcome: decision,
            },
            (None, decision) => Change::Keep(decision),
        })
        .await?;
    Ok(applied.outcome)
}

/// At most `limit` requests per subject in each window of `window` (aligned
/// to the Unix epoch).
#[derive(Debug, Clone)]
pub struct FixedWindow {
    store: Store,
    name: String,
    limit: u64,
    window: Duration,
}

impl FixedWindow {
    /// A limit of `limit` requests per `window`, named `name`.
    pub fn new(
        store: Store,
        name: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Result<Self> {
        check_limit(limit, window)?;
        let name = name.into();
        Name::new(format!("ratelimit/{name}/"))?;
        Ok(FixedWindow {
            store,
            name,
            limit,
            window,
        })
    }

    /// Counts one request of `subject` (a user, an IP, an API key).
    ///
    /// Cancellation: the request may or may not have been counted.
    pub async fn check(&self, subject: &str) -> Result<Decision> {
        let key = Name::new(format!("ratelimit/{}/{subject}", self.name))?;
        let window_ms = self.window.as_millis().max(1) as u64;
        let limit = self.limit;
        let decision = decide(&self.store, key.as_str(), |stored, now| {
            let start = now - now % window_ms;
            let count = stored
                .and_then(|v| v.split_once(' '))
                .filter(|(s, _)| s.parse() == Ok(start))
                .and_then(|(_, c)| c.parse::<u64>().ok())
                .unwrap_or(0);
            let left = Duration::from_millis(start + window_ms - now);
            if count >= limit {
                return (None, Decision::Limited { retry_after: left });
            }
            (
                Some((format!("{start} {}", count + 1), left)),
                Decision::Allowed {
                    remaining: limit - count - 1,
                },
            )
        })
        .await;
        count_limited(&self.name, &decision);
        decision
    }
}

/// GCRA (the generic cell rate algorithm): `limit` requests per `period`,
/// evenly spaced, with bursts of up to `burst` requests at once.
#[derive(Debug, Clone)]
pub struct Gcra {
    store: Store,
    name: String,
    /// Time between requests at the sustained rate, in µs.
    interval_us: u64,
    /// How far ahead of now the schedule may run, in µs.
    tolerance_us: u64,
}

impl Gcra {
    /// `limit` requests per `period`, bursts of up to `burst` (at least 1).
    pub fn new(
        store: Store,
        name: impl Into<String>,
        limit: u64,
        period: Duration,
        burst: u64,
    ) -> Result<Self> {
        check_limit(limit, period)?;
        if burst > MAX_LIMIT {
            return Err(Error::invalid(
                "burst",
                format!("a burst is at most {MAX_LIMIT} requests, not {burst}"),
            ));
        }
        let name = name.into();
        Name::new(format!("ratelimit/{name}/"))?;
        let interval_us = (period.as_micros() as u64 / limit).max(1);
        Ok(Gcra {
            store,
            name,
            interval_us,
            tolerance_us: interval_us * burst.max(1),
        })
    }

    /// Counts one request of `subject`.
    ///
    /// Cancellation: the request may or may not have been counted.
    pub async fn check(&self, subject: &str) -> Result<Decision> {
        let key = Name::new(format!("ratelimit/{}/{subject}", self.name))?;
        let (interval, tolerance) = (self.interval_us, self.tolerance_us);
        let decision = decide(&self.store, key.as_str(), |stored, now_ms| {
            let now = now_ms * 1_000;
            // The theoretical arrival time of the next request.
            let tat = stored
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                .max(now);
            let next = tat + interval;
            if next - now > tolerance {
                let wait = next - now - tolerance;
                return (
                    None,
                    Decision::Limited {
                        retry_after: Duration::from_micros(wait),
                    },
                );
            }
            let remaining = (tolerance - (next - now)) / interval;
            (
                Some((next.to_string(), Duration::from_micros(next - now))),
                Decision::Allowed { remaining },
            )
        })
        .await;
        count_limited(&self.name, &decision);
        decision
    }
}

/// Counts a refused request in `lockward_rate_limited_total`.
fn count_limited(limiter: &str, decision: &Result<Decision>) {
    if let Ok(Decision::Limited { .. }) = decision {
        crate::metrics::rate_limited(limiter);
        tracing::debug!(limiter, "request refused by the rate limit");
    }
}
