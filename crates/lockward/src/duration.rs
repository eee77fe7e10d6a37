//! Human durations (`500ms`, `30s`, `5m`, `1h`, `1m30s`) and TTL limits.

use std::time::Duration;

use crate::error::{Error, Result};

/// Shortest TTL accepted: below it the drift allowance leaves no time to work.
pub const MIN_TTL: Duration = Duration::from_millis(10);
/// Longest TTL accepted. A lock held longer than a week is a bug, not a lease.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parses `500ms`, `30s`, `5m`, `1h`, `2d`, or sums of them such as `1m30s`.
/// A bare number is rejected: the unit is never guessed.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(lockward::duration::parse("1m30s").unwrap(), Duration::from_secs(90));
/// assert!(lockward::duration::parse("30").is_err());
/// ```
pub fn parse(text: &str) -> Result<Duration> {
    let bad = |why: &str| Error::invalid("duration", format!("{text:?}: {why}"));
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad("empty; write for example 500ms, 30s, 5m or 1h"));
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        let value: u64 = rest[..digits]
            .parse()
            .map_err(|_| bad("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86400),
            "" => return Err(bad("missing unit (ms, s, m, h or d)")),
            other => return Err(bad(&format!("unknown unit {other:?} (ms, s, m, h or d)"))),
        };
        rest = &rest[unit_len..];
        let part = u32::try_from(value)
            .ok()
            .and_then(|v| unit.checked_mul(v))
            .ok_or_else(|| bad("too large"))?;
        total = total.checked_add(part).ok_or_else(|| bad("too large"))?;
    }
    Ok(total)
}

/// Checks that `ttl` is within [`MIN_TTL`]..=[`MAX_TTL`].
pub fn check_ttl(ttl: Duration) -> Result<Duration> {
    if ttl.is_zero() {
        return Err(Error::invalid("ttl", "a TTL of zero would expire at once"));
    }
    if ttl < MIN_TTL {
        return Err(Error::invalid(
            "ttl",
            format!("{ttl:?} is shorter than the minimum {MIN_TTL:?}"),
        ));
    }
    if ttl > MAX_TTL {
        return Err(Error::invalid(
            "ttl",
            format!("{ttl:?} is longer than the maximum {MAX_TTL:?} (7 days)"),
        ));
    }
    Ok(ttl)
}

/// Longest a record may be kept: 100 years, far beyond any retention and
/// short enough that every store can add it to its clock.
pub const MAX_RETENTION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Checks a record's TTL (a retention): at least 1 ms, at most
/// [`MAX_RETENTION`].
pub fn check_retention(ttl: Duration) -> Result<Duration> {
    if ttl < Duration::from_millis(1) {
        return Err(Error::invalid(
            "retention",
            "a record kept for less than 1 ms would be gone at once",
        ));
    }
    if ttl > MAX_RETENTION {
        return Err(Error::invalid(
            "retention",
            format!("{ttl:?} is longer than the maximum of 100 years"),
        ));
    }
    Ok(ttl)
}

/// The clock-drift allowance subtracted from a TTL: TTL/100 + 2 ms.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(
            parse("1h2m3s4ms").unwrap(),
            Duration::from_millis(3_723_004)
        );
        for bad in ["", "s", "10", "10x", "-1s", "1.5s", "99999999999999999999s"] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn ttl_limits() {
        assert!(check_ttl(Duration::ZERO).is_err());
        assert!(check_ttl(Duration::from_millis(9)).is_err());
        assert!(check_ttl(Duration::from_secs(8 * 24 * 3600)).is_err());
        assert!(check_ttl(Duration::from_secs(30)).is_ok());
        assert_eq!(drift(Duration::from_secs(10)), Duration::from_millis(102));
        assert!(check_retention(Duration::MAX).is_err());
        assert!(check_retention(Duration::ZERO).is_err());
        assert!(check_retention(MAX_RETENTION).is_ok());
    }
}
