//! The SQL of guarded tables: lockward's schema (the claimed fences, the
//! claim, the check), and the trigger each guarded table gets.
//!
//! SQLSTATEs of lockward's own: `LW001` a stale fence (a newer one was
//! claimed), `LW002` a write with no fence, `LW003` a fence that is not a
//! number, `LW004` a fence that was never claimed (made up, or its claim
//! has not happened yet).

/// The trigger every guarded table (and each of its partitions) carries.
pub(super) const TRIGGER: &str = "lockward_fence";

/// lockward's schema: the fences table, readable and writable by its owner
/// only; `session_fence` (the session's fence for a lock); `claim` (raise a
/// lock's fence, only upwards), `check_fence` (the trigger's check). Run
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

CREATE OR REPLACE FUNCTION lockward.session_fence(p_lock text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    many text := nullif(current_setting('lockward.fences', true), '');
    one_lock text := nullif(current_setting('lockward.lock', true), '');
    one_fence text := nullif(current_setting('lockward.fence', true), '');
    key text := replace(replace(replace(replace(replace(p_lock, '%', '%25'), ',', '%2C'), '=', '%3D'), '''', '%27'), chr(92), '%5C');
    pair text;
BEGIN
    IF many IS NOT NULL THEN
        FOREACH pair IN ARRAY string_to_array(many, ',') LOOP
            IF split_part(pair, '=', 1) = key THEN
                RETURN nullif(split_part(pair, '=', 2), '');
            END IF;
        END LOOP;
    END IF;
    IF one_lock = p_lock THEN
        RETURN one_fence;
    END IF;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION lockward.claim(p_lock text, p_fence bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    stored bigint;
BEGIN
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
    unfenced text := TG_ARGV[1];
    target text := format('%I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME);
    given text := lockward.session_fence(p_lock);
    mine bigint;
    stored lockward.fences%ROWTYPE;
BEGIN
    IF given IS NULL THEN
        IF unfenced = 'allow' THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'LW002',
            MESSAGE = format('%s on %s carries no fence for lock %s', TG_OP, target, p_lock),
            HINT = 'write under `lockward run --fence-db`, or set lockward.fences (or lockward.lock and lockward.fence)';
    END IF;
    BEGIN
        mine := given::bigint;
    EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
        RAISE EXCEPTION USING ERRCODE = 'LW003',
            MESSAGE = format('fence %L for lock %s is not a number', given, p_lock);
    END;
    SELECT * INTO stored FROM lockward.fences f WHERE f.lock_name = p_lock FOR SHARE;
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
