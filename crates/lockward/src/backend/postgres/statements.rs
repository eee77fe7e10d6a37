//! Lease mode's statements, for one table, and why each is safe.

use super::baton;

/// The statements of lease mode, for one table.
pub(super) struct Sql {
    pub(super) table: String,
    pub(super) acquire: String,
    pub(super) acquire_with_baton: String,
    pub(super) wait_then_acquire: String,
    pub(super) release: String,
    pub(super) release_with_baton: String,
    pub(super) watch: String,
    pub(super) ask_to_be_told: String,
    pub(super) extend: String,
    pub(super) extend_with_baton: String,
    pub(super) hold_back: String,
    pub(super) list: String,
}

impl Sql {
    pub(super) fn new(t: &str) -> Sql {
        let live = "expires_at > clock_timestamp()";
        let left = "(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint";
        let baton = baton::key_sql(t, 1);
        // Granted when the row is free or expired and the name's baton is
        // free or this session's (see [`baton`]): a free row goes to the
        // waiter whose turn it is. Concurrent grants serialise on the row
        // (ON CONFLICT, which judges the row's latest version). The fence
        // is the row's last + 1 or the server's clock, whichever is larger
        // (see [`super::clock::CLOCK_FENCE`]). Returns the fence, and how long after the
        // statement's start the row was taken (the server's wait for the
        // baton, when it waited).
        let clock = super::clock::CLOCK_FENCE;
        let take = |source: &str| {
            format!(
                "INSERT INTO {t} AS l (name, owner, holder, fence, expires_at)
                 SELECT $1, $2, $3, {clock}, clock_timestamp() + $4::bigint * interval '1 millisecond'
                 {source}
                 ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, holder = excluded.holder,
                     fence = greatest(l.fence + 1, excluded.fence), expires_at = excluded.expires_at, pid = NULL
                 WHERE l.expires_at <= clock_timestamp()
                 RETURNING fence,
                     (extract(epoch FROM expires_at - statement_timestamp()) * 1000000)::bigint
                         - $4::bigint * 1000 AS waited_us"
            )
        };
        // The try takes the baton for the statement only when it was free.
        let acquire = format!(
            "WITH got AS ({})",
            take(&format!("WHERE pg_try_advisory_xact_lock({baton})"))
        );
        // A waiter's turn and its try in one statement: the insert reads
        // from `turn`, so it runs once the server hands over the baton.
        // The settings come first (a subquery in FROM runs first): the
        // lock wait reads `lock_timeout` when it starts; a wait that fails
        // rolls them back with it. The server looks at the waiter's
        // connection every `BATON_IDLE` while it waits, so a waiter that
        // died leaves the line then, instead of being granted the lock
        // (which a waiter cut off or stopped in the line is, as a
        // ZooKeeper waiter is, and keeps for its lease).
        let wait_then_acquire = format!(
            "WITH turn AS (
                 SELECT pg_advisory_lock({baton}) FROM (
                     SELECT set_config('lock_timeout', $6, false),
                            set_config('idle_session_timeout', $7, false),
                            set_config('client_connection_check_interval', $7, false)) s),
             got AS ({})",
            take("FROM turn")
        );
        // Not granted: the holder's time left, in the same round trip (read
        // in the statement's snapshot: a hint for when to look again).
        let held = format!("{t} WHERE name = $1 AND {live} AND NOT EXISTS (SELECT 1 FROM got)");
        // A release frees the row in place (owner cleared, expired now): an
        // update the server keeps on the row's page, which lookups find at
        // once even while waiting statements hold old snapshots. It tells
        // those who watch the name (leader observers) and a waiter who
        // asked in the row (`pid`, see `ask_to_be_told`), if anyone does: a
        // NOTIFY wakes every listening session of the database, so none is
        // sent otherwise. The next waiter in the baton's line learns from
        // the baton.
        let release = format!(
            "WITH gone AS (
                 UPDATE {t} SET owner = '', holder = NULL, expires_at = clock_timestamp()
                 WHERE name = $1 AND owner = $2 AND {live} RETURNING name, pid),
             told AS (SELECT pg_notify('{t}', name) FROM gone WHERE gone.pid IS NOT NULL OR EXISTS (
                 SELECT 1 FROM {t}_watched w WHERE w.name = gone.name AND w.expires_at > clock_timestamp()))
             SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM told)"
        );
        let extend = format!(
            "UPDATE {t} SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
             WHERE name = $1 AND owner = $2 AND {live}"
        );
        // On the session keeping the baton: the server ends it once it
        // has been idle past the holder's lease ($5 / $4 ms).
        let keep_until = "set_config('idle_session_timeout', $5, false)";
        Sql {
            table: t.to_string(),
            acquire_with_baton: format!(
                "{acquire} SELECT fence, NULL::bigint, {keep_until} FROM got
                 UNION ALL SELECT NULL, {left}, NULL FROM {held}"
            ),
            wait_then_acquire: format!(
                "{wait_then_acquire} SELECT fence, NULL::bigint, waited_us, {keep_until} FROM got
                 UNION ALL SELECT NULL, {left}, NULL, NULL FROM {held}"
            ),
            acquire: format!(
                "{acquire} SELECT fence, NULL::bigint FROM got UNION ALL SELECT NULL, {left} FROM {held}"
            ),
            // Evaluated left to right: the row is freed before the baton
            // passes (the next waiter's statement then waits for this
            // commit on the row, and finds it free).
            release_with_baton: format!(
                "{release}, pg_advisory_unlock({baton}), set_config('idle_session_timeout', '0', false)"
            ),
            ask_to_be_told: format!(
                "UPDATE {t} SET pid = pg_backend_pid() WHERE name = $1 AND {live} RETURNING {left}"
            ),
            watch: format!(
                "INSERT INTO {t}_watched (name, expires_at)
                 VALUES ($1, clock_timestamp() + $2::bigint * interval '1 millisecond')
                 ON CONFLICT (name) DO UPDATE SET expires_at = excluded.expires_at"
            ),
            release,
            extend_with_baton: format!(
                "WITH renewed AS ({extend} RETURNING 1)
                 SELECT (SELECT count(*) FROM renewed), set_config('idle_session_timeout', $4, false)"
            ),
            extend: format!("{extend} RETURNING 1"),
            // A forced unlock of a holder with a lock-delay: the row passes
            // to a placeholder nobody renews, expiry and fence unchanged;
            // the holder's baton passes when its session lets go of it.
            hold_back: format!(
                "UPDATE {t} SET owner = $3, holder = $4 WHERE name = $1 AND owner = $2 AND {live}
                 RETURNING 1"
            ),
            list: format!(
                "SELECT name, owner, holder, fence, {left} FROM {t}
                 WHERE starts_with(name, $1) AND {live} ORDER BY name"
            ),
        }
    }
}
