//! The `SELECT … FOR UPDATE` variant on MySQL or MariaDB (InnoDB row locks).

use std::time::Duration;

use lockward::url::MysqlUrl;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, TxOpts};

use super::table;

/// A plain connection to the server of `my`.
pub(crate) async fn connect(my: &MysqlUrl) -> Result<Conn, String> {
    let opts = OptsBuilder::default()
        .ip_or_hostname(my.endpoint.host.clone())
        .tcp_port(my.endpoint.port)
        .user(Some(my.user.clone()))
        .pass(my.password.as_ref().map(|p| p.expose().to_string()))
        .db_name(Some(my.db.clone()))
        .prefer_socket(false);
    Conn::new(opts)
        .await
        .map_err(|e| format!("cannot connect to MySQL at {}: {e}", my.endpoint))
}

/// Creates the stock row (5 items).
pub async fn stock(my: &MysqlUrl, run: &str) -> Result<(), String> {
    let mut conn = connect(my).await?;
    let t = table(run);
    conn.query_drop(format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, items INT NOT NULL) ENGINE=InnoDB"
    ))
    .await
    .map_err(|e| e.to_string())?;
    conn.query_drop(format!("INSERT INTO {t} VALUES (1, 5)"))
        .await
        .map_err(|e| e.to_string())
}

/// Drops the stock table.
pub async fn clean(my: &MysqlUrl, run: &str) {
    if let Ok(mut conn) = connect(my).await {
        let _ = conn
            .query_drop(format!("DROP TABLE IF EXISTS {}", table(run)))
            .await;
    }
}

/// One buyer: lock the row, take an item if any is left. `true` when sold.
pub async fn buy(my: &MysqlUrl, run: &str) -> Result<bool, String> {
    let mut conn = connect(my).await?;
    let t = table(run);
    let mut tx = conn
        .start_transaction(TxOpts::default())
        .await
        .map_err(|e| e.to_string())?;
    let left: Option<i32> = tx
        .query_first(format!("SELECT items FROM {t} WHERE id = 1 FOR UPDATE"))
        .await
        .map_err(|e| e.to_string())?;
    if left.unwrap_or(0) <= 0 {
        return Ok(false);
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    tx.query_drop(format!("UPDATE {t} SET items = items - 1 WHERE id = 1"))
        .await
        .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())?;
    Ok(true)
}
