//! A claim's wait, the same on every engine: halfway through its bound,
//! look at (or end) the sessions holding it up; then what the claim came
//! to: the stored fence, a stale holder, or a timeout naming who held it.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};

/// Runs `claim` for at most `within` (plus a second for the server's own
/// bound, which should end it first); halfway, `look` describes (and with
/// `--end-stale`, ends) the sessions holding it up. The claim's answer,
/// None when it never came, and what `look` said.
pub(crate) async fn wait_halfway<T, L>(
    claim: impl Future<Output = T>,
    within: Duration,
    look: impl FnOnce() -> L,
) -> (Option<T>, Vec<String>)
where
    L: Future<Output = Vec<String>>,
{
    tokio::pin!(claim);
    tokio::select! {
        answered = &mut claim => (Some(answered), Vec::new()),
        _ = tokio::time::sleep(within / 2) => {
            let blockers = look().await;
            let rest = within - within / 2 + Duration::from_secs(1);
            (tokio::time::timeout(rest, &mut claim).await.ok(), blockers)
        }
    }
}

/// The error of a claim that waited `within` for open transactions under
/// the old fence of `lock` in database `address`.
pub(crate) fn timed_out(lock: &str, address: &str, within: Duration, blockers: &[String]) -> Error {
    let who = match blockers.is_empty() {
        true => "sessions that have ended since".to_string(),
        false => blockers.join("; "),
    };
    Error::TimedOut {
        name: format!(
            "the fence of {lock} in {address}: open transactions that wrote under the old fence did not end: {who}"
        ),
        waited: within,
    }
}

/// What a claim of `fence` that left `stored` comes to: stale when a
/// larger fence was claimed already; else the stored fence and, when the
/// claim ended them, the sessions it ended.
pub(crate) fn settled(
    lock: &str,
    fence: u64,
    stored: u64,
    end_stale: bool,
    blockers: Vec<String>,
) -> Result<(u64, Vec<String>)> {
    if stored > fence {
        return Err(Error::Stale {
            key: lock.to_string(),
            fence,
            current: stored,
        });
    }
    Ok((stored, if end_stale { blockers } else { Vec::new() }))
}
