//! What `lockward doctor --fence-db` checks of a guarded MySQL or MariaDB
//! database: the server's version, the guarded tables and their three
//! triggers, who may claim, and the writes MySQL lets around any trigger
//! (foreign-key cascades, TRUNCATE).

use super::guard::MysqlGuard;
use crate::fence::db::GuardedTable;
use crate::finding::{Finding, Level};

impl MysqlGuard {
    /// The findings on this database, for `lockward doctor --fence-db`.
    ///
    /// Cancellation: reads only; dropping the future changes nothing.
    pub async fn diagnose(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        match self.version().await {
            Ok(version) => out.push(Finding::new(Level::Ok, "fence db: version", version)),
            Err(e) => {
                out.push(Finding::new(
                    Level::Error,
                    "fence db: version",
                    e.to_string(),
                ));
                return out;
            }
        }
        let guarded = match self.guarded().await {
            Ok(guarded) => guarded,
            Err(e) => {
                out.push(Finding::new(
                    Level::Error,
                    "fence db: guarded tables",
                    e.to_string(),
                ));
                return out;
            }
        };
        out.push(tables(&guarded));
        out.push(self.claimer().await);
        out.push(self.cascades(&guarded).await);
        if !guarded.is_empty() {
            out.push(
                Finding::new(
                    Level::Warning,
                    "fence db: truncate",
                    "MySQL fires no trigger on TRUNCATE, so a TRUNCATE of a guarded table is not checked",
                )
                .advise("keep the DROP privilege (which TRUNCATE needs) from the accounts that write under the lock"),
            );
        }
        out
    }

    /// Whether this account may run `lockward_claim`.
    async fn claimer(&self) -> Finding {
        let check = "fence db: claim";
        let definer: Vec<String> = match self
            .rows(
                "SELECT DEFINER FROM information_schema.ROUTINES \
                 WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'lockward_claim'",
                (),
            )
            .await
        {
            Ok(rows) => rows,
            Err(e) => return Finding::new(Level::Error, check, e.to_string()),
        };
        if definer.is_empty() {
            return Finding::new(
                Level::Error,
                check,
                "lockward_claim is not installed in this database",
            )
            .advise("lockward fence install --db URL TABLE… --lock NAME");
        }
        let grants: Vec<String> = match self.rows("SHOW GRANTS", ()).await {
            Ok(rows) => rows,
            Err(e) => return Finding::new(Level::Error, check, e.to_string()),
        };
        let db: Vec<String> = self.rows("SELECT DATABASE()", ()).await.unwrap_or_default();
        let db = db.first().cloned().unwrap_or_default();
        let may = grants.iter().any(|g| {
            (g.contains("ALL PRIVILEGES") || g.contains("EXECUTE"))
                && (g.contains("ON *.*")
                    || g.contains(&format!("ON `{db}`.*"))
                    || g.contains("lockward_claim"))
        });
        let who: Vec<String> = self
            .rows("SELECT CURRENT_USER()", ())
            .await
            .unwrap_or_default();
        let who = who.first().cloned().unwrap_or_default();
        match may {
            true => Finding::new(Level::Ok, check, format!("{who} may claim fences")),
            false => Finding::new(Level::Error, check, format!("{who} may not claim fences"))
                .advise("lockward fence install … --claimer USER@HOST, as the tables' owner"),
        }
    }

    /// Foreign keys whose cascades change a guarded table's rows: MySQL
    /// fires no trigger for those changes.
    async fn cascades(&self, guarded: &[GuardedTable]) -> Finding {
        let check = "fence db: cascades";
        let rows: Vec<(String, String, String, String, String)> = match self
            .rows(
                "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, REFERENCED_TABLE_NAME, DELETE_RULE, UPDATE_RULE \
                 FROM information_schema.REFERENTIAL_CONSTRAINTS \
                 WHERE DELETE_RULE NOT IN ('RESTRICT', 'NO ACTION') \
                    OR UPDATE_RULE NOT IN ('RESTRICT', 'NO ACTION')",
                (),
            )
            .await
        {
            Ok(rows) => rows,
            Err(e) => return Finding::new(Level::Error, check, e.to_string()),
        };
        let around: Vec<String> = rows
            .iter()
            .filter(|(schema, table, ..)| {
                guarded.iter().any(|g| g.table == format!("{schema}.{table}"))
            })
            .map(|(schema, table, parent, on_delete, on_update)| {
                format!("{schema}.{table} changes with {schema}.{parent} (ON DELETE {on_delete}, ON UPDATE {on_update})")
            })
            .collect();
        match around.is_empty() {
            true => Finding::new(
                Level::Ok,
                check,
                "no foreign-key cascade changes a guarded table",
            ),
            false => Finding::new(
                Level::Warning,
                check,
                format!(
                    "MySQL fires no trigger for rows a cascade changes: {}",
                    around.join("; ")
                ),
            )
            .advise("guard the parent tables by the same lock too"),
        }
    }
}

/// The guarded tables, and any that lost one of its triggers.
fn tables(guarded: &[GuardedTable]) -> Finding {
    let check = "fence db: guarded tables";
    if guarded.is_empty() {
        return Finding::new(Level::Warning, check, "no table is guarded")
            .advise("lockward fence install --db URL TABLE… --lock NAME");
    }
    let broken: Vec<&str> = guarded
        .iter()
        .filter(|g| !g.enabled)
        .map(|g| g.table.as_str())
        .collect();
    if !broken.is_empty() {
        return Finding::new(
            Level::Error,
            check,
            format!(
                "{} lack one of their three triggers (insert, update, delete): those writes go around the guard",
                broken.join(", ")
            ),
        )
        .advise("run lockward fence install again on them");
    }
    let list: Vec<String> = guarded
        .iter()
        .map(|g| format!("{} (lock {})", g.table, g.lock))
        .collect();
    Finding::new(Level::Ok, check, list.join(", "))
}
