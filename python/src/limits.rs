//! Rate limits for Python: one check of a subject against a fixed-window
//! or GCRA limit.

use lockward::recipe::{Decision, FixedWindow, Gcra};

/// A decision as Python receives it: (allowed, remaining, retry_after
/// seconds).
pub(crate) type Verdict = (bool, u64, f64);

/// Counts one request of `subject` against the limit `name`: GCRA with
/// bursts of `burst` when given, else fixed windows of `period`.
pub(crate) async fn check(
    store: lockward::Store,
    name: String,
    subject: String,
    limit: u64,
    period: std::time::Duration,
    burst: Option<u64>,
) -> lockward::Result<Verdict> {
    let decision = match burst {
        Some(burst) => {
            Gcra::new(store, name, limit, period, burst)?
                .check(&subject)
                .await?
        }
        None => {
            FixedWindow::new(store, name, limit, period)?
                .check(&subject)
                .await?
        }
    };
    Ok(match decision {
        Decision::Allowed { remaining } => (true, remaining, 0.0),
        Decision::Limited { retry_after } => (false, 0, retry_after.as_secs_f64()),
    })
}
