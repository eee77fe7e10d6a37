//! Status rows (`LockInfo`) as the API's `LockRow`, and back.

use std::time::Duration;

use lockward::{Holding, LockInfo};

use crate::millis;
use crate::pb;

/// `info` as the API shows it.
pub(crate) fn row_of(info: LockInfo) -> pb::LockRow {
    let (holding, of) = match info.holding {
        Holding::Lock => (pb::Holding::Lock, String::new()),
        Holding::Reader { lock } => (pb::Holding::Reader, lock),
        Holding::Permits { semaphore } => (pb::Holding::Permits, semaphore),
    };
    pb::LockRow {
        name: info.name,
        owner: info.owner,
        label: info.label,
        fence: info.fence,
        expires_in_ms: info.expires_in.map(millis),
        waiters: info.waiters.map(|w| w as u64),
        holding: holding as i32,
        of,
    }
}

/// A row the client sends back (to force an unlock) as lockward's.
pub(crate) fn info_of(row: pb::LockRow) -> LockInfo {
    let holding = match pb::Holding::try_from(row.holding) {
        Ok(pb::Holding::Reader) => Holding::Reader { lock: row.of },
        Ok(pb::Holding::Permits) => Holding::Permits { semaphore: row.of },
        _ => Holding::Lock,
    };
    LockInfo {
        name: row.name,
        owner: row.owner,
        label: row.label,
        fence: row.fence,
        expires_in: row.expires_in_ms.map(Duration::from_millis),
        waiters: row.waiters.and_then(|w| usize::try_from(w).ok()),
        holding,
    }
}
