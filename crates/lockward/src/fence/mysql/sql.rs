//! The SQL of guarded tables on MySQL and MariaDB: the claimed fences, the
//! claim, the check, and the three row triggers each guarded table gets.
//!
//! MySQL has no statement-level triggers, so a row trigger checks, and
//! remembers the check for the rest of its statement: `@@timestamp` is the
//! statement's start, so a per-lock session variable holding the
//! `@@timestamp` of the last check lets every later row of that statement
//! go on with one comparison. A statement never spans two transactions, so
//! the fences row the check locked stays locked for every row it lets
//! through. A session that pins `timestamp` itself is checked on every row
//! (the check sees the pinned time is not the real one and keeps no memo).
//!
//! SQLSTATEs as on PostgreSQL: `LW001` stale, `LW002` no fence, `LW003`
//! not a number, `LW004` never claimed (or made up).

/// Every trigger lockward installs starts with this.
pub(super) const TRIGGER_PREFIX: &str = "lockward_fence_";

/// The events a guarded table's triggers fire on (MySQL fires none for
/// TRUNCATE).
pub(super) const EVENTS: [&str; 3] = ["INSERT", "UPDATE", "DELETE"];

/// The claimed fences, one row per lock; names compare byte for byte.
pub(super) const TABLE: &str = "CREATE TABLE IF NOT EXISTS lockward_fences (
    lock_name VARBINARY(256) NOT NULL PRIMARY KEY,
    fence BIGINT UNSIGNED NOT NULL,
    raised_at DATETIME(6) NOT NULL,
    raised_by VARCHAR(300) NOT NULL
) ENGINE=InnoDB";

/// `lockward_claim(lock, fence)`: raises the stored fence only upwards and
/// returns it. The upsert locks the row even when it leaves it as it is,
/// so it waits for every open transaction whose check holds the row.
const CLAIM: &str = "PROCEDURE lockward_claim(IN p_lock VARBINARY(256), IN p_fence BIGINT UNSIGNED)
SQL SECURITY DEFINER MODIFIES SQL DATA
BEGIN
    INSERT INTO lockward_fences (lock_name, fence, raised_at, raised_by)
    VALUES (p_lock, p_fence, SYSDATE(6), SESSION_USER())
    ON DUPLICATE KEY UPDATE
        raised_at = IF(fence < VALUES(fence), VALUES(raised_at), raised_at),
        raised_by = IF(fence < VALUES(fence), VALUES(raised_by), raised_by),
        fence = IF(fence < VALUES(fence), VALUES(fence), fence);
    SELECT fence FROM lockward_fences WHERE lock_name = p_lock;
END";

/// `lockward_check(lock, key, unfenced, table, operation)`: the session's
/// fence for `lock` (`key` is the lock's name as it stands in
/// `@lockward_fences`) against the stored one, the row taken in share
/// mode; sets `@lockward_memo_next` to what the trigger remembers.
const CHECK: &str = "PROCEDURE lockward_check(IN p_lock VARBINARY(256), IN p_key VARBINARY(1280),
    IN p_unfenced VARCHAR(8), IN p_target VARBINARY(260), IN p_op VARCHAR(8))
SQL SECURITY DEFINER READS SQL DATA
BEGIN
    DECLARE v_all BLOB DEFAULT CONCAT(',', IFNULL(@lockward_fences, ''), ',');
    DECLARE v_pos INT DEFAULT LOCATE(CONCAT(',', p_key, '='), v_all);
    DECLARE v_lock TEXT DEFAULT CONVERT(p_lock USING utf8mb4);
    DECLARE v_given BLOB;
    DECLARE v_mine BIGINT UNSIGNED;
    DECLARE v_stored BIGINT UNSIGNED;
    DECLARE v_at VARCHAR(40);
    DECLARE v_by VARCHAR(300);
    SET @lockward_memo_next = NULL;
    IF v_pos > 0 THEN
        SET v_given = SUBSTRING_INDEX(SUBSTRING(v_all, v_pos + LENGTH(p_key) + 2), ',', 1);
    ELSEIF CAST(@lockward_lock AS BINARY) = p_lock THEN
        SET v_given = CAST(@lockward_fence AS BINARY);
    END IF;
    IF v_given IS NULL OR v_given = '' THEN
        IF p_unfenced <> 'allow' THEN
            SET @lockward_message = LEFT(CONCAT(p_op, ' on ', CONVERT(p_target USING utf8mb4),
                ' carries no fence for lock ', v_lock), 128);
            SIGNAL SQLSTATE 'LW002' SET MESSAGE_TEXT = @lockward_message;
        END IF;
    ELSE
        IF v_given NOT REGEXP '^[0-9]{1,20}$'
                OR (LENGTH(v_given) = 20 AND v_given > '18446744073709551615') THEN
            SET @lockward_message = LEFT(CONCAT('fence ', QUOTE(CONVERT(v_given USING utf8mb4)),
                ' for lock ', v_lock, ' is not a number'), 128);
            SIGNAL SQLSTATE 'LW003' SET MESSAGE_TEXT = @lockward_message;
        END IF;
        SET v_mine = CAST(CONVERT(v_given USING utf8mb4) AS UNSIGNED);
        SELECT fence, raised_at, raised_by INTO v_stored, v_at, v_by
            FROM lockward_fences WHERE lock_name = p_lock LOCK IN SHARE MODE;
        IF v_stored IS NULL THEN
            SET @lockward_message = LEFT(CONCAT('fence ', v_mine, ' for lock ', v_lock,
                ' was never claimed'), 128);
            SIGNAL SQLSTATE 'LW004' SET MESSAGE_TEXT = @lockward_message;
        ELSEIF v_stored > v_mine THEN
            SET @lockward_message = LEFT(CONCAT('stale fence ', v_mine, ' for lock ', v_lock,
                ': fence ', v_stored, ' was claimed at ', v_at, ' by ', v_by), 128);
            SIGNAL SQLSTATE 'LW001' SET MESSAGE_TEXT = @lockward_message;
        ELSEIF v_stored < v_mine THEN
            SET @lockward_message = LEFT(CONCAT('fence ', v_mine, ' for lock ', v_lock,
                ' was not claimed (the last claim is ', v_stored, ')'), 128);
            SIGNAL SQLSTATE 'LW004' SET MESSAGE_TEXT = @lockward_message;
        END IF;
    END IF;
    -- Remembered for the rest of this statement, unless the session pinned
    -- its timestamp (then @@timestamp would stay the same across statements).
    SET @lockward_memo_next = IF(ABS(UNIX_TIMESTAMP(SYSDATE(6)) - @@timestamp) < 1, @@timestamp, NULL);
END";

/// The statements that (re)create the routines: MariaDB replaces them in
/// place; MySQL drops and creates (a write in between fails, as the
/// routine is missing: closed, not open).
pub(super) fn routines(mariadb: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (name, body) in [("lockward_claim", CLAIM), ("lockward_check", CHECK)] {
        if mariadb {
            out.push(format!("CREATE OR REPLACE {body}"));
        } else {
            out.push(format!("DROP PROCEDURE IF EXISTS {name}"));
            out.push(format!("CREATE {body}"));
        }
    }
    out
}

/// What one guarded table's trigger for `event` needs.
pub(super) struct Trigger<'a> {
    /// The database lockward's routines live in.
    pub routines_db: &'a str,
    /// The table's schema and name.
    pub schema: &'a str,
    pub table: &'a str,
    pub lock: &'a str,
    pub unfenced: &'a str,
}

impl Trigger<'_> {
    /// The trigger's name for `event`: unique per schema, as MySQL wants.
    pub(super) fn name(&self, event: &str) -> String {
        format!(
            "{TRIGGER_PREFIX}{}_{:016x}",
            event.to_ascii_lowercase(),
            fnv1a(self.table.as_bytes())
        )
    }

    /// The statement that creates the trigger for `event`.
    pub(super) fn create(&self, event: &str, mariadb: bool) -> String {
        let memo = format!("@lockward_memo_{:016x}", fnv1a(self.lock.as_bytes()));
        let or_replace = if mariadb { "OR REPLACE " } else { "" };
        format!(
            "CREATE {or_replace}TRIGGER {schema}.{name} BEFORE {event} ON {schema}.{table} FOR EACH ROW \
             IF NOT ({memo} <=> @@timestamp) THEN \
             CALL {db}.lockward_check({lock}, {key}, '{unfenced}', {target}, '{event}'); \
             SET {memo} = @lockward_memo_next; \
             END IF",
            schema = quote_ident(self.schema),
            name = quote_ident(&self.name(event)),
            table = quote_ident(self.table),
            db = quote_ident(self.routines_db),
            lock = hex(self.lock),
            key = hex(&crate::fence::pairs::encode_name(self.lock)),
            unfenced = self.unfenced,
            target = hex(&format!("{}.{}", self.schema, self.table)),
        )
    }
}

/// The lock and what a trigger does without a fence, read back from the
/// trigger's statement; None when it is not one of lockward's.
pub(super) fn parse_trigger(statement: &str) -> Option<(String, String)> {
    let args = statement.split("lockward_check(").nth(1)?;
    let mut args = args.split(',').map(str::trim);
    let lock = unhex(args.next()?)?;
    let _key = args.next()?;
    let unfenced = args.next()?.trim_matches('\'').to_string();
    Some((lock, unfenced))
}

/// `text` as an SQL hex literal: no quoting, whatever the SQL mode.
fn hex(text: &str) -> String {
    let digits: String = text.bytes().map(|b| format!("{b:02x}")).collect();
    format!("X'{digits}'")
}

fn unhex(literal: &str) -> Option<String> {
    let digits = literal.strip_prefix("X'")?.strip_suffix('\'')?;
    let bytes: Option<Vec<u8>> = (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(digits.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// `text` as an identifier.
pub(super) fn quote_ident(text: &str) -> String {
    format!("`{}`", text.replace('`', "``"))
}

/// A stable 64-bit hash (FNV-1a), for names MySQL limits to 64 characters.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trigger_names_its_lock_so_it_can_be_read_back() {
        let trigger = Trigger {
            routines_db: "shop",
            schema: "shop",
            table: "orders",
            lock: "it's, a=lock",
            unfenced: "allow",
        };
        let sql = trigger.create("INSERT", true);
        assert!(sql.starts_with("CREATE OR REPLACE TRIGGER `shop`.`lockward_fence_insert_"));
        let body = &sql[sql.find("IF NOT").unwrap()..];
        assert_eq!(
            parse_trigger(body),
            Some(("it's, a=lock".to_string(), "allow".to_string()))
        );
        assert_ne!(trigger.name("INSERT"), trigger.name("DELETE"));
        assert!(trigger.name("DELETE").len() <= 64);
    }
}
