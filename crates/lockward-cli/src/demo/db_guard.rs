//! The paused holder's third variant, when the store is a database
//! (PostgreSQL, MySQL or MariaDB): the account is a row of a table that
//! `lockward fence install` guards, so the database itself refuses the
//! resumed holder's write.

use std::time::Duration;

use lockward::fence::{FenceDb, Unfenced};

use super::for_update::Database;

/// The account table of demo run `run`.
fn table(run: &str) -> String {
    format!("lockward_demo_account_{run}")
}

/// Creates the account table and guards it by `lock`'s fence.
pub async fn prepare(url: &str, db: &Database, run: &str, lock: &str) -> Result<(), String> {
    let t = table(run);
    let create = format!("CREATE TABLE {t} (id int PRIMARY KEY, value varchar(16) NOT NULL)");
    match db {
        #[cfg(feature = "postgres")]
        Database::Postgres(pg) => super::for_update::connect(pg)
            .await?
            .batch_execute(&create)
            .await
            .map_err(|e| e.to_string())?,
        #[cfg(feature = "mysql")]
        Database::Mysql(my) => {
            use mysql_async::prelude::Queryable;
            super::for_update::connect_mysql(my)
                .await?
                .query_drop(create)
                .await
                .map_err(|e| e.to_string())?
        }
    }
    let mut guard = FenceDb::connect(url).await.map_err(|e| e.to_string())?;
    guard
        .install(&[t], lock, Unfenced::Refuse, None)
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
    db: &Database,
    run: &str,
    lock: &str,
    fence: u64,
    value: &str,
) -> Result<bool, String> {
    let t = table(run);
    match db {
        #[cfg(feature = "postgres")]
        Database::Postgres(pg) => {
            let mut client = super::for_update::connect(pg).await?;
            // The fence for this transaction, as behind a pooler.
            let tx = client.transaction().await.map_err(|e| e.to_string())?;
            let (set, fences) = lockward::fence::postgres::set_fences_statement(&[(lock, fence)]);
            tx.query_one(set, &[&fences])
                .await
                .map_err(|e| e.to_string())?;
            let written = tx
                .execute(
                    &format!("INSERT INTO {t} VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET value = excluded.value"),
                    &[&value],
                )
                .await;
            match written {
                Ok(_) => tx.commit().await.map(|()| true).map_err(|e| e.to_string()),
                Err(e) if e.code().map(|c| c.code()) == Some("LW001") => Ok(false),
                Err(e) => Err(e.to_string()),
            }
        }
        #[cfg(feature = "mysql")]
        Database::Mysql(my) => {
            use mysql_async::prelude::Queryable;
            let mut conn = super::for_update::connect_mysql(my).await?;
            // What a client's init command would run.
            conn.query_drop(lockward::fence::mysql::init_command(&[(lock, fence)]))
                .await
                .map_err(|e| e.to_string())?;
            let written = conn
                .exec_drop(
                    format!("INSERT INTO {t} VALUES (1, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)"),
                    (value,),
                )
                .await;
            match written {
                Ok(()) => Ok(true),
                Err(mysql_async::Error::Server(s)) if s.state == "LW001" => Ok(false),
                Err(e) => Err(e.to_string()),
            }
        }
    }
}

/// The account's value, and the table dropped.
pub async fn finish(url: &str, db: &Database, run: &str) -> String {
    let t = table(run);
    let value = read_and_drop(db, &t, async {
        if let Ok(mut guard) = FenceDb::connect(url).await {
            let _ = guard.uninstall(std::slice::from_ref(&t), false).await;
        }
    })
    .await;
    value.unwrap_or_default()
}

/// Reads the account from table `t`, runs `unguard`, then drops `t`.
async fn read_and_drop(
    db: &Database,
    t: &str,
    unguard: impl std::future::Future<Output = ()>,
) -> Option<String> {
    let select = format!("SELECT value FROM {t} WHERE id = 1");
    let drop = format!("DROP TABLE IF EXISTS {t}");
    match db {
        #[cfg(feature = "postgres")]
        Database::Postgres(pg) => {
            let client = super::for_update::connect(pg).await.ok()?;
            let value = client
                .query_opt(&select, &[])
                .await
                .ok()
                .flatten()
                .map(|row| row.get::<_, String>(0));
            unguard.await;
            let _ = client.batch_execute(&drop).await;
            value
        }
        #[cfg(feature = "mysql")]
        Database::Mysql(my) => {
            use mysql_async::prelude::Queryable;
            let mut conn = super::for_update::connect_mysql(my).await.ok()?;
            let value: Option<String> = conn.query_first(&select).await.ok().flatten();
            unguard.await;
            let _ = conn.query_drop(&drop).await;
            value
        }
    }
}
