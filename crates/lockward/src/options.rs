//! How to take a lock: TTL, how long to wait, renewal.

use std::time::Duration;

use crate::duration::check_ttl;
use crate::error::{Error, Result};

/// The longest wait [`LockOptions::wait`] accepts: 100 years (use
/// [`LockOptions::wait_forever`] for no limit).
pub const MAX_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Options for one acquisition. The defaults: TTL 30 s, wait forever,
/// renew automatically every TTL/3.
///
/// ```
/// use std::time::Duration;
/// use lockward::LockOptions;
/// let opts = LockOptions::new()
///     .ttl(Duration::from_secs(10))
///     .wait(Duration::from_secs(2))
///     .label("worker-3");
/// assert_eq!(opts.renew_interval(), Some(Duration::from_secs(10) / 3));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    pub(crate) ttl: Duration,
    pub(crate) wait: Option<Duration>,
    pub(crate) renewal: Renewal,
    pub(crate) label: Option<String>,
    pub(crate) lock_delay: Duration,
}

/// Whether a guard renews its lease in the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// No renewal: the lease ends at its TTL unless extended by hand.
    Off,
    /// Renew every TTL/3.
    Auto,
    /// Renew at this interval (must be shorter than the TTL).
    Every(Duration),
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            ttl: Duration::from_secs(30),
            wait: None,
            renewal: Renewal::Auto,
            label: None,
            lock_delay: Duration::ZERO,
        }
    }
}

impl LockOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The lease's time to live on the store.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The longest `acquire` waits before [`Error::TimedOut`].
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Wait without limit (the default); cancel by dropping the future.
    pub fn wait_forever(mut self) -> Self {
        self.wait = None;
        self
    }

    /// Background renewal policy.
    pub fn renewal(mut self, renewal: Renewal) -> Self {
        self.renewal = renewal;
        self
    }

    /// A human label for the holder, shown by `status` where the backend
    /// stores one. Defaults to none.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// After this lease ends *without* a release (its holder died, froze
    /// or lost its connection past the TTL), nobody can take the name for
    /// `delay`; a release frees it at once. Off (zero) by default.
    ///
    /// The protection for resources that cannot check fences: a holder
    /// paused past its deadline gets `delay` more to notice before anyone
    /// else acts. The store's own clock enforces it: the lease lives
    /// `ttl + delay` on the store while the holder's deadline stays
    /// `ttl − drift` from the request. Stores that free a lock the moment
    /// its session ends (ZooKeeper, PostgreSQL advisory, MySQL named) cannot hold
    /// it back: acquisitions with a delay fail there with
    /// [`Error::NotSupported`] (see [`Capabilities::lock_delay`](crate::Capabilities::lock_delay)).
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = lockward::LockOptions::new()
    ///     .ttl(Duration::from_secs(10))
    ///     .lock_delay(Duration::from_secs(15));
    /// assert_eq!(opts.get_lock_delay(), Duration::from_secs(15));
    /// ```
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = delay;
        self
    }

    /// These options with what is left of their wait since `since` (the
    /// same when they wait forever): for a wait that is one over several
    /// steps.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let opts = lockward::LockOptions::new().wait(Duration::from_secs(5));
    /// let left = opts.wait_left(Instant::now() - Duration::from_secs(2));
    /// assert!(left.get_wait().unwrap() <= Duration::from_secs(3));
    /// ```
    pub fn wait_left(&self, since: std::time::Instant) -> LockOptions {
        let mut left = self.clone();
        left.wait = self.wait.map(|w| w.saturating_sub(since.elapsed()));
        left
    }

    /// The configured lock-delay (zero: off).
    pub fn get_lock_delay(&self) -> Duration {
        self.lock_delay
    }

    /// The configured TTL.
    pub fn get_ttl(&self) -> Duration {
        self.ttl
    }

    /// The configured wait limit (`None`: forever).
    pub fn get_wait(&self) -> Option<Duration> {
        self.wait
    }

    /// The renewal interval, or `None` when renewal is off.
    pub fn renew_interval(&self) -> Option<Duration> {
        match self.renewal {
            Renewal::Off => None,
            Renewal::Auto => Some(self.ttl / 3),
            Renewal::Every(every) => Some(every),
        }
    }

    /// Checks every field (a wait above [`MAX_WAIT`] is refused: no clock can
    /// add it); called by the store before it sends anything.
    pub fn validate(&self) -> Result<()> {
        check_ttl(self.ttl)?;
        if !self.lock_delay.is_zero() {
            // The store keeps the lease for both.
            check_ttl(self.ttl.saturating_add(self.lock_delay)).map_err(|_| {
                Error::invalid(
                    "lock_delay",
                    format!(
                        "the TTL {:?} and the lock-delay {:?} together are longer than a lease can be",
                        self.ttl, self.lock_delay
                    ),
                )
            })?;
            // The deadline allows for clock drift over the whole stored
            // lease; a TTL that the drift eats up would be lost at once.
            let drift = (self.ttl + self.lock_delay) / 100 + Duration::from_millis(2);
            if self.ttl <= drift * 2 {
                return Err(Error::invalid(
                    "lock_delay",
                    format!(
                        "a lock-delay of {:?} needs a TTL above {:?} (twice the clock drift allowed over both)",
                        self.lock_delay,
                        drift * 2
                    ),
                ));
            }
        }
        if let Some(wait) = self.wait {
            if wait > MAX_WAIT {
                return Err(Error::invalid(
                    "wait",
                    format!("{wait:?} is longer than 100 years; use wait_forever() to wait without a limit"),
                ));
            }
        }
        if let Renewal::Every(every) = self.renewal {
            if every.is_zero() || every >= self.ttl {
                return Err(Error::invalid(
                    "renewal",
                    format!(
                        "the renewal interval {every:?} must be above zero and below the TTL {:?}",
                        self.ttl
                    ),
                ));
            }
        }
        if let Some(label) = &self.label {
            if label.len() > 256 || label.chars().any(char::is_control) {
                return Err(Error::invalid(
                    "label",
                    "a holder label is at most 256 bytes without control characters",
                ));
            }
        }
        Ok(())
    }
}
