//! The paused holder's third variant, when the store is PostgreSQL: the
//! account is a row of a table that `lockward fence install` guards, so
//! the database itself refuses the resumed holder's write.

use std::time::Duration;

use lockward::fence::{FenceDb, Unfenced};
use lockward::url::PostgresUrl;

use super::for_update::connect;

/// The account table of demo run `run`.
fn table(run: &str) -> String {
    format!("lockward_demo_account_{run}")
}

/// Creates the account table and guards it by `lock`'s fence.
pub async fn prepare(url: &str, pg: &PostgresUrl, run: &str, lock: &str) -> Result<(), String> {
    let t = table(run);
    connect(pg)
        .await?
        .batch_execute(&format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, value text NOT NULL)"
        ))
        .await
        .map_err(|e| e.to_string())?;
    let mut db = FenceDb::connect(url).await.map_err(|e| e.to_string())?;
    db.install(&[t], lock, Unfenced::Refuse, None)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Claims `fence` for `lock`, as `lockward run --fence-db` does right
/// after acquiring.
pub async fn claim(url: &str, lock: &str, fence: u64) -> Result<(), String> {
    let db = FenceDb::connect(url).await.map_err(|e| e.to_string())?;
    db.claim(lock, fence, Duration::from_secs(5))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Writes the account with `fence` in the session, as any program would;
/// false when the database refused it as stale.
pub async fn write(
    pg: &PostgresUrl,
    run: &str,
    lock: &str,
    fence: u64,
    value: &str,
) -> Result<bool, String> {
    let mut client = connect(pg).await?;
    // The fence for this transaction, as behind a pooler.
    let tx = client.transaction().await.map_err(|e| e.to_string())?;
    let (set, fences) = lockward::fence::postgres::set_fences_statement(&[(lock, fence)]);
    tx.query_one(set, &[&fences])
        .await
        .map_err(|e| e.to_string())?;
    let written = tx
        .execute(
            &format!(
                "INSERT INTO {} VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET value = excluded.value",
                table(run)
            ),
            &[&value],
        )
        .await;
    match written {
        Ok(_) => tx.commit().await.map(|()| true).map_err(|e| e.to_string()),
        Err(e) if e.code().map(|c| c.code()) == Some("LW001") => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// The account's value, and the table dropped.
pub async fn finish(url: &str, pg: &PostgresUrl, run: &str) -> String {
    let t = table(run);
    let Ok(client) = connect(pg).await else {
        return String::new();
    };
    let value = client
        .query_opt(&format!("SELECT value FROM {t} WHERE id = 1"), &[])
        .await
        .ok()
        .flatten()
        .map(|row| row.get::<_, String>(0))
        .unwrap_or_default();
    if let Ok(mut db) = FenceDb::connect(url).await {
        let _ = db.uninstall(std::slice::from_ref(&t), false).await;
    }
    let _ = client
        .batch_execute(&format!("DROP TABLE IF EXISTS {t}"))
        .await;
    value
}
