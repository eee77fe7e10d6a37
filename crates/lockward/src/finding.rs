//! What a doctor check reports, below both the doctor's dispatch
//! (`doctor/`) and each backend's checks (`backend/<name>/doctor.rs`): a
//! [`Finding`] with its [`Level`], and the clock-offset finding of the
//! stores that time expiry by their server's clock.

/// How a finding bears on the store's guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// As it should be.
    Ok,
    /// Works, with a weaker guarantee or a risk: read the advice.
    Warning,
    /// Do not rely on this store as it is.
    Error,
}

impl Level {
    /// `ok`, `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How it bears on the guarantees.
    pub level: Level,
    /// What was checked.
    pub check: String,
    /// What was found.
    pub detail: String,
    /// What to do about it (empty when nothing).
    pub advice: String,
}

impl Finding {
    pub(crate) fn new(level: Level, check: &str, detail: impl Into<String>) -> Finding {
        Finding {
            level,
            check: check.to_string(),
            detail: detail.into(),
            advice: String::new(),
        }
    }

    pub(crate) fn advise(mut self, advice: impl Into<String>) -> Finding {
        self.advice = advice.into();
        self
    }
}

/// The local wall clock, in ms since the Unix epoch.
#[cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]
pub(crate) fn local_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A finding for a clock offset of `offset_ms` between this host and the
/// store (measured at the middle of a round trip of `rtt_ms`).
#[cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]
pub(crate) fn clock_finding(offset_ms: i64, rtt_ms: i64) -> Finding {
    let detail = format!("{offset_ms:+} ms (± {} ms)", rtt_ms / 2 + 1);
    if offset_ms.abs() > 1_000 {
        Finding::new(Level::Warning, "clock offset", detail).advise(
            "expiry runs on the store's clock, so locks stay safe; but fix NTP: \
             cron fire times and logs compare clocks",
        )
    } else {
        Finding::new(Level::Ok, "clock offset", detail)
    }
}
