//! The probe every store gets: round trips, mutual exclusion between two
//! handles, and fences that grow.

use std::time::{Duration, Instant};

use super::{Finding, Level};
use crate::options::{LockOptions, Renewal};
use crate::store::Store;

/// Probes `store`: round trips, mutual exclusion between two handles, and
/// fences that grow, as findings.
///
/// Cancellation: dropping the future stops the probe; a probe lock it took is
/// released in the background or runs out at its TTL.
pub async fn probe(store: &Store) -> Vec<Finding> {
    let name = format!("lockward-doctor/{}", crate::owner::OwnerId::random());
    let opts = LockOptions::new()
        .ttl(Duration::from_secs(5))
        .renewal(Renewal::Off);
    let mut findings = Vec::new();
    let mut cycles = Vec::new();
    let mut fences = Vec::new();
    for _ in 0..10 {
        let began = Instant::now();
        let guard = match store.try_acquire(&name, &opts).await {
            Ok(g) => g,
            Err(e) => {
                findings.push(Finding::new(Level::Error, "acquire", e.to_string()));
                return findings;
            }
        };
        fences.push(guard.fence());
        if let Err(e) = guard.release().await {
            findings.push(Finding::new(Level::Error, "release", e.to_string()));
            return findings;
        }
        cycles.push(began.elapsed());
    }
    cycles.sort();
    findings.push(Finding::new(
        Level::Ok,
        "acquire+release",
        format!(
            "p50 {:?}, worst {:?} over {} cycles",
            cycles[cycles.len() / 2],
            cycles[cycles.len() - 1],
            cycles.len()
        ),
    ));
    if fences.windows(2).all(|w| w[0] < w[1]) {
        findings.push(Finding::new(
            Level::Ok,
            "fences",
            format!(
                "strictly increasing ({} … {})",
                fences[0],
                fences[fences.len() - 1]
            ),
        ));
    } else {
        findings.push(
            Finding::new(
                Level::Error,
                "fences",
                format!("not increasing: {fences:?}"),
            )
            .advise("do not use this store for fenced writes; report it"),
        );
    }
    // Mutual exclusion, seen from a second handle.
    let other = store.clone();
    match store.try_acquire(&name, &opts).await {
        Ok(held) => {
            let second = other.try_acquire(&name, &opts).await;
            let excluded = matches!(second, Err(crate::Error::Busy { .. }));
            findings.push(if excluded {
                Finding::new(Level::Ok, "mutual exclusion", "a second holder was refused")
            } else {
                Finding::new(
                    Level::Error,
                    "mutual exclusion",
                    format!("a second acquire gave {second:?}"),
                )
                .advise("do not use this store; report it")
            });
            if let Ok(extra) = second {
                let _ = extra.release().await;
            }
            let _ = held.release().await;
        }
        Err(e) => findings.push(Finding::new(
            Level::Error,
            "mutual exclusion",
            e.to_string(),
        )),
    }
    findings
}
