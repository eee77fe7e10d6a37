//! What this process saw of the Leases others hold, and since when: a
//! holder counts as expired once its record stayed unchanged for its
//! `leaseDurationSeconds` on this process's clock (never by comparing
//! `renewTime`, which another host's clock wrote, with ours).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::lease_record::Record;

/// A Lease held by someone else, as this process last saw it change.
#[derive(Debug, Clone)]
struct Observation {
    record: Record,
    seen: Instant,
}

/// The Leases held by others, by object name, as last seen.
#[derive(Debug, Default)]
pub(super) struct Observed(Mutex<HashMap<String, Observation>>);

impl Observed {
    /// How long the holder of `object` keeps it unless it renews: its
    /// duration from the moment this process first saw the record as it is
    /// now.
    pub(super) fn time_left(&self, object: &str, record: &Record) -> Duration {
        let now = Instant::now();
        let mut observed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let seen = match observed.get(object) {
            Some(o) if o.record == *record => o.seen,
            _ => {
                observed.insert(
                    object.to_string(),
                    Observation {
                        record: record.clone(),
                        seen: now,
                    },
                );
                now
            }
        };
        let duration = Duration::from_secs(record.duration.max(0) as u64);
        (seen + duration).saturating_duration_since(now)
    }

    /// Drops what was observed of `object` (taken or found free by us).
    pub(super) fn forget(&self, object: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(object);
    }
}
