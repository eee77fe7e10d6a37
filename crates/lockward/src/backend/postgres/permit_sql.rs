//! The semaphores' schema and statements in lease mode (the layout is
//! described in `permits.rs`).

/// How many rows a semaphore's count is split over (fewer when it has
/// fewer permits): takes on different shards commit without waiting for
/// each other.
const SHARDS: i32 = 16;

/// How far (µs) the fence sequence may trail the server's clock before a
/// take moves it on to the clock (see `T_permit_fence` in [`schema`]).
const FENCE_TRAIL_US: i64 = 10_000;

/// The tables and functions of the semaphores of lock table `t`, for the
/// schema's transaction.
///
/// A permit's fence is `T_permit_fence()`: the next value of the table's
/// sequence, unique and growing as sequences are, and never more than
/// [`FENCE_TRAIL_US`] behind the server's clock in µs. A take that finds
/// it further behind (time passed, or a promoted standby's sequence
/// missed the last values) moves it on to the clock and draws again, so
/// fences pass the ones a lost primary granted (docs/fences.md). Moving
/// it takes a lock held only around `nextval` and `setval` (which do not
/// wait for commits), so takes do not queue behind one another's commits
/// for it; about one take per [`FENCE_TRAIL_US`] moves it. Measured with
/// pgbench (take + give back, 8 clients, one run): 1.03x the plain
/// sequence's rate, within the run's noise.
pub(super) fn schema(t: &str) -> String {
    let clock = super::clock::CLOCK_FENCE;
    format!(
        "CREATE OR REPLACE FUNCTION {t}_permit_fence() RETURNS bigint LANGUAGE plpgsql AS $f$
         DECLARE
             f bigint := nextval('{t}_fence');
         BEGIN
             IF f >= {clock} - {FENCE_TRAIL_US} THEN RETURN f; END IF;
             -- A session lock, let go at once (nextval and setval are seen
             -- by others before any commit); the two-key form is a key
             -- space apart from the locks' one-key locks.
             PERFORM pg_advisory_lock(hashtext('{t}_fence'), 0);
             BEGIN
                 -- Another take may have moved it on while this one waited.
                 f := nextval('{t}_fence');
                 IF f < {clock} - {FENCE_TRAIL_US} THEN
                     f := setval('{t}_fence', {clock});
                 END IF;
             EXCEPTION WHEN OTHERS OR query_canceled THEN
                 PERFORM pg_advisory_unlock(hashtext('{t}_fence'), 0);
                 RAISE;
             END;
             PERFORM pg_advisory_unlock(hashtext('{t}_fence'), 0);
             RETURN f;
         END $f$;
         CREATE TABLE IF NOT EXISTS {t}_permit_shards (
             name  text NOT NULL,
             shard integer NOT NULL,
             taken bigint NOT NULL,
             quota bigint NOT NULL,
             PRIMARY KEY (name, shard)
         );
         CREATE TABLE IF NOT EXISTS {t}_permits (
             name       text NOT NULL,
             owner      text NOT NULL,
             holder     text,
             shard      integer NOT NULL,
             permits    bigint NOT NULL,
             fence      bigint NOT NULL,
             expires_at timestamptz NOT NULL,
             PRIMARY KEY (name, owner)
         );
         CREATE INDEX IF NOT EXISTS {t}_permits_expiry ON {t}_permits (name, expires_at);
         -- Returns the fence, or -1 - (permits free) when they do not fit.
         CREATE OR REPLACE FUNCTION {t}_take_permits(
             n text, o text, label text, total bigint, k bigint, ttl_ms bigint
         ) RETURNS bigint LANGUAGE plpgsql AS $f$
         DECLARE
             shards integer;
             mine   integer := (hashtext(o) & 2147483647) % least({SHARDS}, total)::integer;
             used   bigint;
             spare  bigint;
             f      bigint;
             drawn  bigint;
             live   boolean;
             now_   timestamptz;
         BEGIN
             -- A variable, not clock_timestamp() itself: an index scan can
             -- be bounded by a value, not by a volatile function.
             now_ := clock_timestamp();
             SELECT fence, expires_at > now_ INTO f, live FROM {t}_permits
              WHERE name = n AND owner = o;
             -- A retried call whose first run took them.
             IF FOUND AND live THEN RETURN f; END IF;
             -- The fence before any row is locked: nobody holding a row
             -- waits for the fence's lock.
             drawn := {t}_permit_fence();
             IF NOT FOUND THEN
                 INSERT INTO {t}_permits (name, owner, holder, shard, permits, fence, expires_at)
                 VALUES (n, o, label, mine, k, drawn, now_ + ttl_ms * interval '1 millisecond')
                 RETURNING fence INTO f;
                 UPDATE {t}_permit_shards SET taken = taken + k
                  WHERE name = n AND shard = mine AND taken + k <= quota;
                 IF FOUND THEN RETURN f; END IF;
             END IF;
             -- Not within this shard's quota (or a new semaphore): lock every
             -- shard, in order, drop lapsed holders, judge by the total.
             INSERT INTO {t}_permit_shards (name, shard, taken, quota)
             SELECT n, s, 0, 0 FROM generate_series(0, least({SHARDS}, total) - 1) s
             ON CONFLICT (name, shard) DO NOTHING;
             PERFORM 1 FROM {t}_permit_shards WHERE name = n ORDER BY shard FOR UPDATE;
             -- Every shard is shared out, also ones a caller with more
             -- permits made, so that the quotas never add up to more.
             SELECT count(*) INTO shards FROM {t}_permit_shards WHERE name = n;
             now_ := clock_timestamp();
             -- Rows a release is deleting are skipped: it lowers its shard
             -- itself (and waiting for it here could deadlock).
             WITH gone AS (
                 DELETE FROM {t}_permits WHERE ctid IN (
                     SELECT ctid FROM {t}_permits WHERE name = n AND expires_at <= now_
                     FOR UPDATE SKIP LOCKED)
                 RETURNING shard, permits
             ), freed AS (SELECT shard, sum(permits) AS permits FROM gone GROUP BY shard)
             UPDATE {t}_permit_shards p SET taken = p.taken - freed.permits
               FROM freed WHERE p.name = n AND p.shard = freed.shard;
             SELECT sum(taken) INTO used FROM {t}_permit_shards WHERE name = n;
             IF used + k > total THEN
                 DELETE FROM {t}_permits WHERE name = n AND owner = o;
                 RETURN -1 - greatest(total - used, 0);
             END IF;
             -- Ours goes to our shard; what is left is shared out again,
             -- so takes go back to touching one shard each.
             spare := total - used - k;
             UPDATE {t}_permit_shards
                SET taken = taken + CASE WHEN shard = mine THEN k ELSE 0 END,
                    quota = taken + CASE WHEN shard = mine THEN k ELSE 0 END
                          + spare / shards + CASE WHEN shard < spare % shards THEN 1 ELSE 0 END
              WHERE name = n;
             INSERT INTO {t}_permits (name, owner, holder, shard, permits, fence, expires_at)
             VALUES (n, o, label, mine, k, drawn, now_ + ttl_ms * interval '1 millisecond')
             ON CONFLICT (name, owner) DO UPDATE SET expires_at = excluded.expires_at, shard = excluded.shard
             RETURNING fence INTO f;
             RETURN f;
         END $f$;"
    )
}

/// The semaphore statements of lock table `t`.
pub(super) struct PermitSql {
    pub(super) take: String,
    pub(super) extend: String,
    pub(super) release: String,
    pub(super) held: String,
    pub(super) list: String,
}

impl PermitSql {
    pub(super) fn new(t: &str) -> PermitSql {
        PermitSql {
            take: format!("SELECT {t}_take_permits($1, $2, $3, $4, $5, $6)"),
            extend: format!(
                "UPDATE {t}_permits SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
                 WHERE name = $1 AND owner = $2 AND expires_at > clock_timestamp()
                 RETURNING 1"
            ),
            // The holder's row first, then the count (reading what the
            // delete returned): the semaphore's row stays locked only from
            // the count's update to the commit. 1 when the lease was live.
            release: format!(
                "WITH gone AS (
                     DELETE FROM {t}_permits WHERE name = $1 AND owner = $2
                     RETURNING shard, permits, expires_at > clock_timestamp() AS live
                 ), counted AS (
                     UPDATE {t}_permit_shards p SET taken = p.taken - gone.permits
                       FROM gone WHERE p.name = $1 AND p.shard = gone.shard
                     RETURNING gone.live
                 )
                 SELECT coalesce((SELECT live::int FROM counted), 0)"
            ),
            // The count, less what lapsed holders not yet dropped took:
            // reads only, through the expiry index (bounded by the
            // statement's time: a volatile clock_timestamp() cannot bound
            // an index scan).
            held: format!(
                "SELECT coalesce((SELECT sum(taken) FROM {t}_permit_shards WHERE name = $1), 0)::bigint
                      - coalesce((SELECT sum(permits) FROM {t}_permits
                                   WHERE name = $1 AND expires_at <= statement_timestamp()), 0)::bigint"
            ),
            list: format!(
                "SELECT name, owner, holder, fence,
                        (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint
                 FROM {t}_permits
                 WHERE starts_with(name, $1) AND expires_at > clock_timestamp()
                 ORDER BY name, fence"
            ),
        }
    }
}
