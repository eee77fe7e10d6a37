//! The lease flags every command that holds a lock shares (`--ttl`,
//! `--wait`, `--no-wait`, `--grace`), parsed once and checked together.

use std::time::Duration;

use lockward::{LockOptions, Store};

use crate::exit;

/// How long the lock is leased, waited for, and how CMD is stopped.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaseArgs {
    /// Lease TTL on the store, renewed every TTL/3 while CMD runs [default:
    /// 30s, or the longest the store allows when that is shorter: on
    /// ZooKeeper the session timeout the server granted].
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Option<Duration>,
    /// Wait at most this long for the lock (default: wait forever).
    #[arg(long, value_parser = parse_duration, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,
    /// Do not wait: exit 75 at once if the lock is held.
    #[arg(long)]
    pub no_wait: bool,
    /// Between SIGTERM and SIGKILL when the lock is lost (default TTL/4).
    #[arg(long, value_parser = parse_duration)]
    pub grace: Option<Duration>,
    /// If this holder dies or freezes without releasing, nobody gets the
    /// lock for this long after its lease ran out (a clean release frees it
    /// at once): for resources that cannot check fences. Not on stores
    /// that free locks when a session ends (ZooKeeper, PostgreSQL advisory
    /// mode, MySQL named mode).
    #[arg(long, value_parser = parse_duration)]
    pub lock_delay: Option<Duration>,
}

impl LeaseArgs {
    /// The lock options on `store` and the grace period; the exit status
    /// (after a message) when the flags do not fit together.
    pub fn options(&self, store: &Store) -> Result<(LockOptions, Duration), u8> {
        let ttl = self.ttl.unwrap_or_else(|| default_ttl(store));
        if let Err(e) = lockward::duration::check_ttl(ttl) {
            eprintln!("lockward: {e}");
            return Err(exit::USAGE);
        }
        let grace = self.grace.unwrap_or(ttl / 4);
        if grace.is_zero() || grace >= ttl / 2 {
            eprintln!(
                "lockward: --grace {grace:?} must be above zero and below half the TTL ({:?})",
                ttl / 2
            );
            return Err(exit::USAGE);
        }
        let mut opts = LockOptions::new().ttl(ttl).label(crate::holder::label());
        if let Some(wait) = self.wait {
            opts = opts.wait(wait);
        }
        if let Some(delay) = self.lock_delay {
            opts = opts.lock_delay(delay);
        }
        if let Err(e) = opts.validate() {
            eprintln!("lockward: {e}");
            return Err(exit::USAGE);
        }
        Ok((opts, grace))
    }
}

/// The TTL when `--ttl` is not given: 30 s, or the longest the store
/// allows when that is shorter, so that the defaults work on every store.
pub fn default_ttl(store: &Store) -> Duration {
    let default = Duration::from_secs(30);
    store.max_ttl().map_or(default, |max| default.min(max))
}

/// A duration flag: `500ms`, `30s`, `5m`, `1h`, `1m30s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    lockward::duration::parse(text).map_err(|e| e.to_string())
}

/// A duration flag that may also be `0` (off).
pub fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    if text.trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}
