//! Lease mode's line of waiters: a table of leased places per name
//! (`TABLE_line`), ordered by when each waiter joined on the server's
//! clock. Each waiter listens on a channel of its own, `lockward_OWNER`
//! (owner ids are random, so no two waiters share one); a release notifies
//! the first live place there, which reaches that waiter's connection only.

use std::time::Duration;

use async_trait::async_trait;

use super::lease::{millis, remaining, LeaseBackend};
use crate::backend::{Attempt, InLine, Leave, LockBackend, Request, Subscription};
use crate::error::Result;
use crate::name::Name;
use crate::owner::OwnerId;

/// The channel a waiter listens on for its turn.
fn turn_channel(owner: OwnerId) -> String {
    format!("lockward_{owner}")
}

/// The first live place in the line of `$1`, as a query of one `owner`.
pub(super) fn first_place(t: &str) -> String {
    format!(
        "SELECT owner FROM {t}_line WHERE name = $1 AND expires_at > clock_timestamp()
         ORDER BY joined_at, owner LIMIT 1"
    )
}

/// The statements of the line, for one table.
pub(super) struct LineSql {
    join: String,
    leave: String,
}

impl LineSql {
    pub(super) fn new(t: &str) -> LineSql {
        let first = first_place(t);
        let live = "expires_at > clock_timestamp()";
        let left = "(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint";
        LineSql {
            // Joins (or renews the place of $2 for $3 ms), drops lapsed
            // places, and answers: the holder's time left (NULL when free),
            // the first in line and its place's time left. The answer is
            // read in the statement's snapshot, which does not hold our own
            // new place: no first means we are it. A free lock kept for
            // another first in line reminds that waiter.
            join: format!(
                "WITH lapsed AS (DELETE FROM {t}_line WHERE name = $1 AND expires_at <= clock_timestamp()),
                 placed AS (
                     INSERT INTO {t}_line (name, owner, joined_at, expires_at)
                     VALUES ($1, $2, clock_timestamp(), clock_timestamp() + $3::bigint * interval '1 millisecond')
                     ON CONFLICT (name, owner) DO UPDATE SET expires_at = excluded.expires_at),
                 state AS (
                     SELECT (SELECT {left} FROM {t} WHERE name = $1 AND {live}) AS held_left,
                            coalesce(({first}), $2) AS first),
                 reminded AS (
                     SELECT pg_notify('lockward_' || first, $1) FROM state
                     WHERE held_left IS NULL AND first <> $2)
                 SELECT held_left, first = $2,
                        (SELECT {left} FROM {t}_line l, state WHERE l.name = $1 AND l.owner = state.first),
                        (SELECT count(*) FROM reminded)
                 FROM state"
            ),
            leave: format!(
                "WITH gone AS (DELETE FROM {t}_line WHERE name = $1 AND owner = $2)
                 SELECT pg_notify('lockward_' || f.owner, $1)
                 FROM (SELECT owner FROM {t}_line WHERE name = $1 AND owner <> $2 AND {live}
                       ORDER BY joined_at, owner LIMIT 1) f
                 WHERE NOT EXISTS (SELECT 1 FROM {t} WHERE name = $1 AND {live})"
            ),
        }
    }
}

#[async_trait]
impl InLine for LeaseBackend {
    async fn try_in_line(
        &self,
        req: &Request<'_>,
        place: Duration,
        _ticket: u64,
    ) -> Result<Attempt> {
        if let granted @ Attempt::Granted { .. } = self.try_acquire(req).await? {
            return Ok(granted);
        }
        let owner = req.owner.to_string();
        let rows = self
            .run(
                &self.sql.line.join,
                &[&req.name.as_str(), &owner, &millis(place)],
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(Attempt::Held { expires_in: None });
        };
        let held_left: Option<i64> = row.get(0);
        let first: bool = row.get(1);
        let first_left: Option<i64> = row.get(2);
        let expires_in = match (held_left, first) {
            // Ours to take as soon as the holder's lease ends.
            (Some(ms), true) => Some(remaining(ms)),
            // Free and ours (the first before us just lapsed): at once.
            (None, true) => Some(Duration::ZERO),
            // Behind others: at our turn.
            (Some(_), false) => None,
            // Free but kept for the first in line, reminded just now.
            (None, false) => first_left.map(remaining),
        };
        Ok(Attempt::Held { expires_in })
    }

    async fn subscribe_turn(&self, _name: &Name, owner: OwnerId) -> Result<Subscription> {
        let wakeup = self.listener.listen(&turn_channel(owner), None).await?;
        Ok(Subscription::pushed(wakeup))
    }

    fn leave_line(&self, name: &Name, owner: OwnerId) -> Leave {
        let (shared, sql) = (self.shared.clone(), self.sql.line.leave.clone());
        let name = name.to_string();
        Box::pin(async move {
            // Best effort: a place left behind lapses with its lease.
            let _ = shared.query(&sql, &[&name, &owner.to_string()]).await;
        })
    }
}
