//! Durations as the integers stores keep (milliseconds, microseconds) and
//! back, saturating instead of overflowing or going negative.

use std::time::Duration;

/// `d` in whole milliseconds; `i64::MAX` past that.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A TTL in whole milliseconds, at least 1: stores read 0 as "no time
/// left" or refuse it.
pub(crate) fn ttl_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// `d` in whole microseconds; `i64::MAX` past that.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A time left in milliseconds, as a store computed it; zero when negative.
pub(crate) fn from_millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A time left in microseconds, as a store computed it; zero when negative.
pub(crate) fn from_micros(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates_both_ways() {
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(millis(Duration::MAX), i64::MAX);
        assert_eq!(ttl_millis(Duration::from_micros(10)), 1);
        assert_eq!(micros(Duration::MAX), i64::MAX);
        assert_eq!(from_millis(-5), Duration::ZERO);
        assert_eq!(from_micros(-1), Duration::ZERO);
        assert_eq!(from_micros(2_000), Duration::from_millis(2));
    }
}
