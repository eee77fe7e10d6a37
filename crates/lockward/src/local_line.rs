//! The local waiting line: waiters for one name in one process queue here,
//! first come first served, and only the head waits on the store. A release
//! then wakes one local contender instead of all of them, which spares the
//! store a herd of re-checks (and Redlock a storm of split votes), and
//! waiters of one process are served in order on every backend.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use tokio::sync::OwnedMutexGuard;

use crate::name::Name;

/// The lines of one store, one per name that has waiters.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    lines: Mutex<HashMap<Name, Weak<tokio::sync::Mutex<()>>>>,
}

/// A place at the head of a line; the next waiter moves up when it drops.
pub(crate) type Turn = OwnedMutexGuard<()>;

impl Lines {
    /// Waits for our turn on `name`, or `None` once `deadline` passes.
    ///
    /// Cancellation: dropping the future leaves the line at once; the next
    /// waiter moves up.
    pub async fn turn(&self, name: &Name, deadline: Option<Instant>) -> Option<Turn> {
        let line = {
            let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
            match lines.get(name).and_then(Weak::upgrade) {
                Some(line) => line,
                None => {
                    // Forget lines nobody stands in any more.
                    lines.retain(|_, l| l.strong_count() > 0);
                    let line = Arc::new(tokio::sync::Mutex::new(()));
                    lines.insert(name.clone(), Arc::downgrade(&line));
                    line
                }
            }
        };
        match deadline {
            None => Some(line.lock_owned().await),
            Some(d) => tokio::time::timeout_at(d.into(), line.lock_owned())
                .await
                .ok(),
        }
    }
}
