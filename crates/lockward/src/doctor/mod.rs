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

pub use crate::finding::{Finding, Level};
use crate::store::Store;
use crate::url::StoreUrl;

/// Runs every check on the store of `url`. A store that cannot be opened
/// yields one error finding that says why.
///
/// Cancellation: dropping the future stops the checks; the probe's test lock,
/// if taken, runs out at its TTL.
pub async fn diagnose(url: &StoreUrl) -> Vec<Finding> {
    let store = match Store::connect(url).await {
        Ok(store) => store,
        Err(e) => {
            return vec![Finding::new(Level::Error, "reachable", e.to_string())
                .advise("check the URL, the server and the network")]
        }
    };
    let mut findings = vec![
        Finding::new(Level::Ok, "reachable", store.address()),
        capabilities(&store.capabilities()),
    ];
    findings.extend(server_findings(url).await);
    findings.extend(probe::probe(&store).await);
    findings
}

/// What this store does and does not do, so that an operator knows
/// before relying on it (a forced unlock, a lock-delay, FIFO waiters).
fn capabilities(c: &crate::Capabilities) -> Finding {
    let all = [
        (c.fifo, "FIFO waiters"),
        (c.pushed_wakeups, "pushed wake-ups"),
        (c.server_clock, "expiry on the server's clock"),
        (
            c.server_detects_loss,
            "locks freed when a holder's session ends",
        ),
        (c.durable, "durable fences"),
        (c.lock_delay(), "lock-delay"),
        (c.force_unlock(), "forced unlock"),
        (c.native_rw_lock, "native read-write locks"),
        (c.native_semaphore, "native semaphores"),
    ];
    let pick = |has: bool| {
        all.iter()
            .filter(|(h, _)| *h == has)
            .map(|(_, what)| *what)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (yes, no) = (pick(true), pick(false));
    let text = if no.is_empty() {
        yes
    } else {
        format!("{yes}; not: {no}")
    };
    Finding::new(Level::Ok, "capabilities", text)
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
        #[cfg(feature = "mysql")]
        StoreUrl::Mysql(m) => backend::mysql::doctor::check(m).await,
        #[cfg(feature = "kubernetes")]
        StoreUrl::Kubernetes(k) => backend::kubernetes::doctor::check(k).await,
        #[allow(unreachable_patterns)]
        _ => Vec::new(),
    }
}
