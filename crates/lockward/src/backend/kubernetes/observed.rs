//! What this process saw of the Leases others hold, and since when: a
//! holder counts as expired once its record stayed unchanged for its
//! `leaseDurationSeconds` on this process's clock (never by comparing
//! `renewTime`, which another host's clock wrote, with ours). Reads and
//! the waiters' watches both report what they see, so the clock of a
//! holder that stopped renewing starts when its last renewal was seen.

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
        let seen = self.saw(object, record);
        let duration = Duration::from_secs(record.duration.max(0) as u64);
        (seen + duration).saturating_duration_since(Instant::now())
    }

    /// Notes that `object` shows `record` now, and returns when this
    /// process first saw it so. A record seen before keeps its first
    /// sighting; any change (a renewal writes a new `renewTime`) starts
    /// the clock again. Seeing a record late only makes its expiry later,
    /// so a watch that missed events while it was closed stays safe.
    pub(super) fn saw(&self, object: &str, record: &Record) -> Instant {
        let now = Instant::now();
        let mut observed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match observed.get(object) {
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
        }
    }

    /// Drops what was observed of `object` (taken or found free by us).
    pub(super) fn forget(&self, object: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(object);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::lease_record::{renewed, taken, Record};
    use super::Observed;

    #[test]
    fn a_record_keeps_its_first_sighting_and_a_renewal_starts_the_clock_again() {
        let observed = Observed::default();
        let spec = taken(None, "other", Duration::from_secs(4));
        let first = Record::of(Some(&spec));
        let seen = observed.saw("lease", &first);
        std::thread::sleep(Duration::from_millis(20));
        // Seen again (a read, or the watch): still timed from the first sighting.
        assert_eq!(observed.saw("lease", &first), seen);
        let left = observed.time_left("lease", &first);
        assert!(left <= Duration::from_millis(3_980), "{left:?}");
        // A renewal is a new record: its clock starts when it is seen.
        std::thread::sleep(Duration::from_millis(2));
        let again = Record::of(Some(&renewed(&spec, Duration::from_secs(4))));
        assert_ne!(again, first);
        assert!(observed.saw("lease", &again) > seen);
        assert!(observed.time_left("lease", &again) > left);
        observed.forget("lease");
        assert!(observed.saw("lease", &again) > seen);
    }
}
