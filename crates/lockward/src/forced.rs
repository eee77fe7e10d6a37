//! The trace a forced unlock leaves: a record naming the lease it ended, so
//! that the ended holder, refused at its next renewal, can say why.

use std::time::Duration;

use crate::backend::RecordBackend;
use crate::error::LostReason;
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

/// How long the trace is kept when the holder's lease has no known end
/// (it must outlive the holder's next renewal).
pub(crate) const KEPT_WITHOUT_EXPIRY: Duration = Duration::from_secs(600);

/// The record key of the trace for lock `name`.
pub(crate) fn trace_key(name: &str) -> crate::error::Result<Name> {
    Name::new(format!("forced-unlock/{name}"))
}

/// What the trace records of the ended holder: its fence where the store
/// shows one (every lockward holder knows its own), else its owner.
pub(crate) fn trace_of(holder: &LockInfo) -> String {
    match holder.fence {
        Some(fence) => format!("fence {fence}"),
        None => format!("owner {}", holder.owner),
    }
}

/// Why the store refused the renewal of the lease `owner` holds on `name`
/// with `fence`: a forced unlock when its trace names this lease, else
/// taken over. A failed read says taken over: the lease is gone either way.
pub(crate) async fn why_refused(
    backend: &dyn RecordBackend,
    name: &Name,
    owner: OwnerId,
    fence: u64,
) -> LostReason {
    let Ok(key) = trace_key(name.as_str()) else {
        return LostReason::TakenOver;
    };
    let ours = [format!("fence {fence}"), format!("owner {owner}")];
    match backend.record(&key).await {
        Ok(Some(trace)) if ours.contains(&trace) => LostReason::ForcedUnlock,
        _ => LostReason::TakenOver,
    }
}
