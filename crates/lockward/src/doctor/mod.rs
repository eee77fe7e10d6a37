//! The doctor's report and its dispatch: checks a store before people
//! trust it: reachable, version, round trip,
//! clock offset, settings that weaken the guarantees, and a short probe of
//! mutual exclusion and fence order. Each finding is ok, warning or error,
//! with what to do.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let url: lockward::StoreUrl = "memory://".parse()?;
//! let findings = lockward::doctor::diagnose(&url).await;
//! assert!(findings.iter().all(|f| f.level != lockward::doctor::Level::Error));
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```

mod probe;

use crate::store::Store;
use crate::url::StoreUrl;

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

/// Runs every check on the store of `url`. A store that cannot be opened
/// yields one error finding that says why.
pub async fn diagnose(url: &StoreUrl) -> Vec<Finding> {
    let store = match Store::connect(url).await {
        Ok(store) => store,
        Err(e) => {
            return vec![Finding::new(Level::Error, "reachable", e.to_string())
                .advise("check the URL, the server and the network")]
        }
    };
    let mut findings = vec![Finding::new(Level::Ok, "reachable", store.address())];
    findings.extend(server_findings(url).await);
    findings.extend(probe::probe(&store).await);
    findings
}

/// What the backend's own server says about itself: one line per store,
/// each backend's checks in its folder (`backend/<name>/doctor.rs`).
async fn server_findings(url: &StoreUrl) -> Vec<Finding> {
    use crate::backend;
    match url {
        StoreUrl::Memory => backend::memory::doctor::check(),
        StoreUrl::Sqlite { path } => backend::sqlite::doctor::check(path),
        #[cfg(feature = "redis")]
        StoreUrl::Redis(r) => backend::redis::doctor::check(r).await,
        #[cfg(feature = "redis")]
        StoreUrl::Redlock(r) => backend::redlock::doctor::check(r).await,
        #[cfg(feature = "etcd")]
        StoreUrl::Etcd(e) => backend::etcd::doctor::check(e).await,
        #[cfg(feature = "zookeeper")]
        StoreUrl::Zookeeper(z) => backend::zookeeper::doctor::check(z).await,
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(p) => backend::postgres::doctor::check(p).await,
        #[allow(unreachable_patterns)]
        _ => Vec::new(),
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
