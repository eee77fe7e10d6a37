//! The most leases one daemon holds at once: every lease stream and every
//! lock taken through Dapr's API is admitted against one count, so no
//! client can grow the daemon's memory without bound.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tonic::{Code, Status};

use crate::errors::status;

/// The most leases a daemon holds at once unless told otherwise. A held
/// lease costs the daemon about 13 KB, so this is about 270 MB.
pub const DEFAULT_MAX_LEASES: usize = 20_000;

/// The count of held leases and its limit, shared by every service of one
/// daemon.
#[derive(Clone)]
pub(crate) struct Capacity {
    held: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
}

/// One admitted lease; dropping it frees its place.
pub(crate) struct Admitted(Arc<AtomicUsize>);

impl Capacity {
    pub(crate) fn new(max: usize) -> Capacity {
        Capacity {
            held: Arc::default(),
            max: Arc::new(AtomicUsize::new(max)),
        }
    }

    /// Sets the limit for every admission from now on.
    pub(crate) fn set_max(&self, max: usize) {
        self.max.store(max, Ordering::Relaxed);
    }

    /// A place for one more lease, or `RESOURCE_EXHAUSTED` (lockward kind
    /// `TooManyLeases`) when the daemon holds its most.
    pub(crate) fn admit(&self) -> Result<Admitted, Status> {
        let max = self.max.load(Ordering::Relaxed);
        let taken = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Admitted(self.held.clone())),
            Err(_) => Err(status(
                Code::ResourceExhausted,
                format!(
                    "this daemon already holds its most leases ({max}); \
                     release some or raise --max-leases"
                ),
                "TooManyLeases",
            )),
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_limit_and_again_once_a_place_is_freed() {
        let capacity = Capacity::new(2);
        let first = capacity.admit().unwrap();
        let _second = capacity.admit().unwrap();
        let refused = capacity.admit().err().unwrap();
        assert_eq!(refused.code(), Code::ResourceExhausted);
        assert!(refused.message().contains("--max-leases"), "{refused:?}");
        drop(first);
        assert!(capacity.admit().is_ok());
        capacity.set_max(0);
        assert!(capacity.admit().is_err());
    }
}
