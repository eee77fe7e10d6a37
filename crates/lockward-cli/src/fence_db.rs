//! `--fence-db URL`: claim the held locks' fences in a guarded database
//! (PostgreSQL, MySQL or MariaDB) before CMD starts, and hand CMD the
//! session settings that make its writes carry them.

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
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    {
        use lockward::fence::{Engine, FenceDb};
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
        Ok(match db.engine() {
            Engine::Postgres => postgres_env(fences),
            Engine::Mysql => mysql_env(fences),
        })
    }
    #[cfg(not(any(feature = "postgres", feature = "mysql")))]
    {
        let _ = (url, fences, within, end_stale);
        eprintln!(
            "lockward: --fence-db needs lockward's `postgres` or `mysql` feature, which this build lacks"
        );
        Err(exit::USAGE)
    }
}

/// `PGOPTIONS` with the fences appended (so the caller's own options
/// stay), and the options alone for clients that take them in their
/// connection string.
#[cfg(feature = "postgres")]
fn postgres_env(fences: &[(&str, u64)]) -> Vec<(&'static str, String)> {
    let options = lockward::fence::postgres::session_options(fences);
    let pgoptions = match std::env::var("PGOPTIONS") {
        Ok(theirs) if !theirs.trim().is_empty() => format!("{theirs} {options}"),
        _ => options.clone(),
    };
    vec![
        ("PGOPTIONS", pgoptions),
        ("LOCKWARD_FENCE_DB_OPTIONS", options),
    ]
}

#[cfg(all(feature = "mysql", not(feature = "postgres")))]
fn postgres_env(_: &[(&str, u64)]) -> Vec<(&'static str, String)> {
    Vec::new()
}

/// The statement for the client's init command: no MySQL client reads
/// session variables from the environment.
#[cfg(feature = "mysql")]
fn mysql_env(fences: &[(&str, u64)]) -> Vec<(&'static str, String)> {
    vec![(
        "LOCKWARD_FENCE_DB_INIT",
        lockward::fence::mysql::init_command(fences),
    )]
}

#[cfg(all(feature = "postgres", not(feature = "mysql")))]
fn mysql_env(_: &[(&str, u64)]) -> Vec<(&'static str, String)> {
    Vec::new()
}

/// The message and exit status of a claim that did not happen: a newer
/// fence claimed already means this holder lost its lock (76).
#[cfg(any(feature = "postgres", feature = "mysql"))]
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
