//! MySQL's side client: `SELECT 1` as the floor, the lock table's size as
//! the size.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use mysql_async::Params;

use super::core::Db;
use super::url::MysqlUrl;
use crate::backend::side_client::{ServerBytes, SideClient};
use crate::error::Result;

/// A plain pool on the server.
pub struct MysqlSide {
    db: Db,
    table: String,
}

impl MysqlSide {
    /// Connects to the server of `url`.
    ///
    /// Cancellation: dropping the future gives up the connection.
    pub async fn connect(url: &MysqlUrl) -> Result<MysqlSide> {
        Ok(MysqlSide {
            db: Db::connect(url).await?,
            table: url.table.clone(),
        })
    }
}

#[async_trait]
impl SideClient for MysqlSide {
    async fn floor_round_trip(&mut self) -> Result<Duration> {
        let began = Instant::now();
        self.db.rows::<u8>("SELECT 1", Params::Empty).await?;
        Ok(began.elapsed())
    }

    /// The lock table's data and index, as InnoDB counts them once its
    /// statistics are brought up to date (they lag by design otherwise).
    async fn server_bytes(&mut self) -> Result<Option<ServerBytes>> {
        self.db
            .batch(&format!("ANALYZE TABLE {}", self.table))
            .await?;
        let rows: Vec<u64> = self
            .db
            .rows(
                "SELECT CAST(data_length + index_length AS UNSIGNED) FROM information_schema.tables
                 WHERE table_schema = DATABASE() AND table_name = ?",
                Params::Positional(vec![self.table.clone().into()]),
            )
            .await?;
        Ok(rows.into_iter().next().map(|bytes| ServerBytes {
            bytes,
            what: "lock table size",
        }))
    }
}
