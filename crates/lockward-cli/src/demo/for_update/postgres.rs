//! The `SELECT … FOR UPDATE` variant on PostgreSQL.

use std::time::Duration;

use lockward::url::PostgresUrl;

/// A plain connection to the store's database.
pub(crate) async fn connect(pg: &PostgresUrl) -> Result<tokio_postgres::Client, String> {
    let mut config = tokio_postgres::Config::new();
    config
        .host(&pg.endpoint.host)
        .port(pg.endpoint.port)
        .user(&pg.user)
        .dbname(&pg.db);
    if let Some(password) = &pg.password {
        config.password(password.expose());
    }
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect to PostgreSQL at {}: {e}", pg.endpoint))?;
    tokio::spawn(connection);
    Ok(client)
}

use super::table;

/// Creates the stock row (5 items).
pub async fn stock(pg: &PostgresUrl, run: &str) -> Result<(), String> {
    let client = connect(pg).await?;
    let t = table(run);
    client
        .batch_execute(&format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, items int NOT NULL);
             INSERT INTO {t} VALUES (1, 5);"
        ))
        .await
        .map_err(|e| e.to_string())
}

/// Drops the stock table.
pub async fn clean(pg: &PostgresUrl, run: &str) {
    if let Ok(client) = connect(pg).await {
        let _ = client
            .batch_execute(&format!("DROP TABLE IF EXISTS {}", table(run)))
            .await;
    }
}

/// One buyer: lock the row, take an item if any is left. `true` when sold.
pub async fn buy(pg: &PostgresUrl, run: &str) -> Result<bool, String> {
    let mut client = connect(pg).await?;
    let t = table(run);
    let tx = client.transaction().await.map_err(|e| e.to_string())?;
    let left: i32 = tx
        .query_one(
            &format!("SELECT items FROM {t} WHERE id = 1 FOR UPDATE"),
            &[],
        )
        .await
        .map_err(|e| e.to_string())?
        .get(0);
    if left <= 0 {
        return Ok(false);
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    tx.execute(
        &format!("UPDATE {t} SET items = items - 1 WHERE id = 1"),
        &[],
    )
    .await
    .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())?;
    Ok(true)
}
