//! What `lockward doctor --fence-db` checks of a guarded database: the
//! server's version, the guarded tables and whether a trigger was
//! disabled, partitions added since `install`, who may claim, and the
//! settings that let writes go around the guard.

use super::guard::PostgresGuard;
use super::sql::TRIGGER;
use crate::finding::{Finding, Level};

impl PostgresGuard {
    /// The findings on this database, for `lockward doctor --fence-db`.
    ///
    /// Cancellation: reads only; dropping the future changes nothing.
    pub async fn diagnose(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        match self
            .read_one("SELECT current_setting('server_version')")
            .await
        {
            Ok(version) => out.push(Finding::new(
                Level::Ok,
                "fence db: version",
                format!("PostgreSQL {version}"),
            )),
            Err(e) => {
                out.push(Finding::new(Level::Error, "fence db: version", e));
                return out;
            }
        }
        out.push(self.tables().await);
        out.push(self.unguarded_partitions().await);
        out.push(self.claimer().await);
        out.push(self.replication_role().await);
        out
    }

    async fn read_one(&self, sql: &str) -> Result<String, String> {
        self.client()
            .query_one(sql, &[])
            .await
            .map(|row| row.get::<_, String>(0))
            .map_err(|e| self.fail(&e).to_string())
    }

    async fn tables(&self) -> Finding {
        let check = "fence db: guarded tables";
        let guarded = match self.guarded().await {
            Ok(guarded) => guarded,
            Err(e) => return Finding::new(Level::Error, check, e.to_string()),
        };
        if guarded.is_empty() {
            return Finding::new(Level::Warning, check, "no table is guarded")
                .advise("lockward fence install --db URL TABLE… --lock NAME");
        }
        let disabled: Vec<&str> = guarded
            .iter()
            .filter(|g| !g.enabled)
            .map(|g| g.table.as_str())
            .collect();
        if !disabled.is_empty() {
            return Finding::new(
                Level::Error,
                check,
                format!("the guard is disabled on {} (ALTER TABLE … DISABLE TRIGGER): writes go around it", disabled.join(", ")),
            )
            .advise(format!("ALTER TABLE … ENABLE TRIGGER {TRIGGER}"));
        }
        let list: Vec<String> = guarded
            .iter()
            .map(|g| format!("{} (lock {})", g.table, g.lock))
            .collect();
        Finding::new(Level::Ok, check, list.join(", "))
    }

    /// Partitions of a guarded partitioned table that have no guard (made
    /// after `install`).
    async fn unguarded_partitions(&self) -> Finding {
        let check = "fence db: partitions";
        let rows = self
            .client()
            .query(
                "SELECT p.relid::regclass::text FROM pg_trigger t \
                 CROSS JOIN LATERAL pg_partition_tree(t.tgrelid) p \
                 WHERE t.tgname = $1 AND p.relid <> t.tgrelid AND p.isleaf \
                 AND NOT EXISTS (SELECT 1 FROM pg_trigger u WHERE u.tgrelid = p.relid AND u.tgname = $1) \
                 ORDER BY 1",
                &[&TRIGGER],
            )
            .await;
        match rows {
            Ok(rows) if rows.is_empty() => Finding::new(
                Level::Ok,
                check,
                "every partition of a guarded table is guarded",
            ),
            Ok(rows) => {
                let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                Finding::new(
                    Level::Error,
                    check,
                    format!("not guarded (made after install): {}", names.join(", ")),
                )
                .advise("run lockward fence install again on the partitioned table")
            }
            Err(e) => Finding::new(Level::Error, check, self.fail(&e).to_string()),
        }
    }

    async fn claimer(&self) -> Finding {
        let check = "fence db: claim";
        let may = self
            .client()
            .query_one(
                "SELECT CASE WHEN to_regprocedure('lockward.claim(text,bigint)') IS NULL THEN false \
                 ELSE has_function_privilege('lockward.claim(text,bigint)', 'EXECUTE') END, current_user::text",
                &[],
            )
            .await;
        match may {
            Ok(row) if row.get::<_, bool>(0) => Finding::new(
                Level::Ok,
                check,
                format!("{} may claim fences", row.get::<_, String>(1)),
            ),
            Ok(row) => Finding::new(
                Level::Error,
                check,
                format!("{} may not claim fences", row.get::<_, String>(1)),
            )
            .advise("lockward fence install … --claimer ROLE, as the tables' owner"),
            Err(e) => Finding::new(Level::Error, check, self.fail(&e).to_string()),
        }
    }

    async fn replication_role(&self) -> Finding {
        let check = "fence db: triggers fire";
        match self.read_one("SELECT current_setting('session_replication_role')").await {
            Ok(role) if role == "origin" => Finding::new(
                Level::Ok,
                check,
                "session_replication_role = origin; writes go around the guard only with a superuser's replica role, a disabled trigger, or logical replication's apply",
            ),
            Ok(role) => Finding::new(
                Level::Error,
                check,
                format!("session_replication_role = {role}: triggers do not fire, so the guard is off for sessions like this one"),
            )
            .advise("ALTER ROLE … RESET session_replication_role (or the database's setting)"),
            Err(e) => Finding::new(Level::Error, check, e),
        }
    }
}
