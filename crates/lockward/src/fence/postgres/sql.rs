//! The SQL of guarded tables: lockward's schema (the claimed fences, the
//! claim, the check), and the trigger each guarded table gets.
//!
//! A writer's check holds, to the end of its transaction, what a claim of
//! the same lock waits for: a shared advisory lock (key `1819764323`,
//! `hashtext(lock)`) under READ COMMITTED, the fence's row `FOR SHARE`
//! otherwise. Checked by the model `crates/lockward-models/src/fence_claim.rs`
//! over every interleaving within its bounds (docs/models.md).
//!
//! SQLSTATEs of lockward's own: `LW001` a stale fence (a newer one was
//! claimed), `LW002` a write with no fence, `LW003` a fence that is not a
//! number, `LW004` a fence that was never claimed (made up, or its claim
//! has not happened yet).

/// The trigger every guarded table (and each of its partitions) carries.
pub(super) const TRIGGER: &str = "lockward_fence";

/// lockward's schema: the fences table, readable and writable by its owner
/// only; `claim` (raise a lock's fence, only upwards), `check_fence` (the
/// trigger's check; its arguments are the lock, what to do without a
/// fence, and the lock's name as it stands in `lockward.fences`). Run
/// again, it changes nothing but the functions' bodies.
pub(super) const SCHEMA: &str = r#"
CREATE SCHEMA IF NOT EXISTS lockward;
REVOKE ALL ON SCHEMA lockward FROM PUBLIC;
CREATE TABLE IF NOT EXISTS lockward.fences (
    lock_name text PRIMARY KEY,
    fence bigint NOT NULL,
    raised_at timestamptz NOT NULL,
    raised_by text NOT NULL
);
REVOKE ALL ON lockward.fences FROM PUBLIC;

DROP FUNCTION IF EXISTS lockward.session_fence(text);

CREATE OR REPLACE FUNCTION lockward.claim(p_lock text, p_fence bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    stored bigint;
BEGIN
    -- Waits for the writers that checked under READ COMMITTED (their shared
    -- advisory lock); the upsert's row lock waits for the others.
    PERFORM pg_advisory_xact_lock(1819764323, hashtext(p_lock));
    INSERT INTO lockward.fences AS f (lock_name, fence, raised_at, raised_by)
    VALUES (p_lock, p_fence, clock_timestamp(), session_user)
    ON CONFLICT (lock_name) DO UPDATE
        SET fence = excluded.fence, raised_at = excluded.raised_at, raised_by = excluded.raised_by
        WHERE f.fence < excluded.fence
    RETURNING f.fence INTO stored;
    IF stored IS NULL THEN
        SELECT f.fence INTO stored FROM lockward.fences f WHERE f.lock_name = p_lock;
    END IF;
    RETURN stored;
END
$fn$;
REVOKE ALL ON FUNCTION lockward.claim(text, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION lockward.check_fence() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    p_lock text := TG_ARGV[0];
    -- The session's fence for p_lock: its pair in lockward.fences (TG_ARGV[2]
    -- is the lock's name as it stands there), else lockward.lock/fence.
    many text := ',' || current_setting('lockward.fences', true) || ',';
    at int := position(',' || TG_ARGV[2] || '=' in many);
    given text;
    mine bigint;
    stored lockward.fences%ROWTYPE;
BEGIN
    IF at > 0 THEN
        given := split_part(substr(many, at + length(TG_ARGV[2]) + 2), ',', 1);
    ELSIF current_setting('lockward.lock', true) = p_lock THEN
        given := current_setting('lockward.fence', true);
    END IF;
    IF given IS NULL OR given = '' THEN
        IF TG_ARGV[1] = 'allow' THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'LW002',
            MESSAGE = format('%s on %I.%I carries no fence for lock %s',
                TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, p_lock),
            HINT = 'write under `lockward run --fence-db`, or set lockward.fences (or lockward.lock and lockward.fence)';
    END IF;
    BEGIN
        mine := given::bigint;
    EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
        RAISE EXCEPTION USING ERRCODE = 'LW003',
            MESSAGE = format('fence %L for lock %s is not a number', given, p_lock);
    END;
    -- Held to the end of the transaction, so a claim waits for it. Under
    -- READ COMMITTED a shared advisory lock, then a fresh snapshot's read:
    -- no write to the fences row. A transaction with one snapshot for all
    -- its statements must lock the row itself: a claim committed after that
    -- snapshot then fails its read instead of going unseen.
    IF current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM pg_advisory_xact_lock_shared(1819764323, hashtext(p_lock));
        SELECT * INTO stored FROM lockward.fences f WHERE f.lock_name = p_lock;
    ELSE
        SELECT * INTO stored FROM lockward.fences f WHERE f.lock_name = p_lock FOR SHARE;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'LW004',
            MESSAGE = format('fence %s for lock %s was never claimed', mine, p_lock),
            HINT = 'the holder claims its fence first (`lockward run --fence-db` does)';
    ELSIF stored.fence > mine THEN
        RAISE EXCEPTION USING ERRCODE = 'LW001',
            MESSAGE = format('stale fence %s for lock %s: fence %s was claimed at %s by %s',
                mine, p_lock, stored.fence, stored.raised_at, stored.raised_by),
            HINT = 'this writer lost the lock; a newer holder writes now';
    ELSIF stored.fence < mine THEN
        RAISE EXCEPTION USING ERRCODE = 'LW004',
            MESSAGE = format('fence %s for lock %s was not claimed (the last claim is %s)',
                mine, p_lock, stored.fence),
            HINT = 'the holder claims its fence first (`lockward run --fence-db` does)';
    END IF;
    RETURN NULL;
END
$fn$;
"#;
