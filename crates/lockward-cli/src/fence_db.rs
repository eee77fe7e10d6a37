//! `--fence-db URL`: claim the held locks' fences in a guarded PostgreSQL
//! database before CMD starts, and hand CMD the session settings that make
//! its writes carry them.

use std::time::Duration;

use crate::exit;

/// Claims `fences` (lock name, fence) in database `url`, waiting at most
/// `within` for each (with `end_stale`, ending the sessions that hold a
/// claim up halfway through); CMD's extra environment, or the exit status
/// after a message saying why CMD will not start.
pub async fn claim(
    url: &str,
    fences: &[(&str, u64)],
    within: Duration,
    end_stale: bool,
) -> Result<Vec<(&'static str, String)>, u8> {
    #[cfg(feature = "postgres")]
    {
        use lockward::fence::postgres::{session_options, FenceDb};
        let db = FenceDb::connect(url).await.map_err(|e| refused(&e))?;
        for (name, fence) in fences {
            if end_stale {
                let (_, ended) = db
                    .claim_ending_stale(name, *fence, within)
                    .await
                    .map_err(|e| refused(&e))?;
                for session in ended {
                    eprintln!(
                        "lockward: ended a stale session holding up the fence of {name}: {session}"
                    );
                }
            } else {
                db.claim(name, *fence, within)
                    .await
                    .map_err(|e| refused(&e))?;
            }
        }
        let options = session_options(fences);
        // Appended, so the caller's own options stay.
        let pgoptions = match std::env::var("PGOPTIONS") {
            Ok(theirs) if !theirs.trim().is_empty() => format!("{theirs} {options}"),
            _ => options.clone(),
        };
        Ok(vec![
            ("PGOPTIONS", pgoptions),
            ("LOCKWARD_FENCE_DB_OPTIONS", options),
        ])
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = (url, fences, within, end_stale);
        eprintln!(
            "lockward: --fence-db needs lockward's `postgres` feature, which this build lacks"
        );
        Err(exit::USAGE)
    }
}

/// The message and exit status of a claim that did not happen: a newer
/// fence claimed already means this holder lost its lock (76).
#[cfg(feature = "postgres")]
fn refused(e: &lockward::Error) -> u8 {
    match e {
        lockward::Error::Stale { key, .. } => {
            eprintln!("lockward: lock {key} was lost before the command started: {e}");
            exit::LOST
        }
        other => {
            eprintln!("lockward: cannot claim the fence, so the command does not start: {other}");
            exit::for_error(other)
        }
    }
}
