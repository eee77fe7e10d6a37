//! Status rows (`LockInfo`) as Python tuples, which `lockward.Holder`
//! wraps: (name, owner, label, fence, expires_in seconds, waiters, holding,
//! of).

use lockward::{Holding, LockInfo};

/// A row as Python receives it.
pub(crate) type Row = (
    String,
    String,
    Option<String>,
    Option<u64>,
    Option<f64>,
    Option<usize>,
    &'static str,
    Option<String>,
);

/// `info` as a row.
pub(crate) fn row_of(info: LockInfo) -> Row {
    let (holding, of) = match info.holding {
        Holding::Lock => ("lock", None),
        Holding::Reader { lock } => ("reader", Some(lock)),
        Holding::Permits { semaphore } => ("permits", Some(semaphore)),
    };
    (
        info.name,
        info.owner,
        info.label,
        info.fence,
        info.expires_in.map(|d| d.as_secs_f64()),
        info.waiters,
        holding,
        of,
    )
}
