//! Fenced writes to PostgreSQL: the classic
//! `UPDATE … WHERE key = $3 AND fencing_token < $2`, as one upsert that also
//! inserts a missing row.

use async_trait::async_trait;
use tokio_postgres::{Client, NoTls};

use crate::error::{Error, Result};
use crate::fence::{Fenced, FencedResource};

/// A table `(key text PRIMARY KEY, value bytea, fence bigint)`, created if
/// missing.
pub struct PostgresRegister {
    client: Client,
    table: String,
}

fn unavailable(e: tokio_postgres::Error) -> Error {
    Error::Unavailable {
        address: "postgres register".into(),
        message: e
            .as_db_error()
            .map_or_else(|| e.to_string(), |d| d.message().to_string()),
        cause: None,
    }
}

impl PostgresRegister {
    /// Connects with a libpq-style or URL connection string and opens
    /// `table` (a plain SQL name).
    ///
    /// Cancellation: dropping the future drops the connection attempt; a table
    /// it created stays.
    pub async fn connect(conninfo: &str, table: &str) -> Result<Self> {
        if table.is_empty()
            || !table
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(Error::invalid(
                "table",
                format!("{table:?} is not a plain SQL name"),
            ));
        }
        let (client, connection) = tokio_postgres::connect(conninfo, NoTls)
            .await
            .map_err(unavailable)?;
        tokio::spawn(connection);
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {table} (key text PRIMARY KEY, value bytea NOT NULL, fence bigint NOT NULL)"
            ))
            .await
            .map_err(unavailable)?;
        Ok(PostgresRegister {
            client,
            table: table.to_string(),
        })
    }
}

impl PostgresRegister {
    /// One conditional upsert: `set` applies only when `fence` is at least
    /// the stored one (a new key is inserted with `value`); otherwise
    /// [`Error::Stale`] with the stored fence.
    async fn upsert(&self, key: &str, value: &[u8], fence: u64, set: &str) -> Result<()> {
        let t = &self.table;
        let fence_sql =
            i64::try_from(fence).map_err(|_| Error::invalid("fence", "above i64::MAX"))?;
        let applied = self
            .client
            .query_opt(
                &format!(
                    "INSERT INTO {t} AS r (key, value, fence) VALUES ($1, $2, $3)
                     ON CONFLICT (key) DO UPDATE SET {set}
                     WHERE r.fence <= excluded.fence
                     RETURNING 1"
                ),
                &[&key, &value, &fence_sql],
            )
            .await
            .map_err(unavailable)?;
        if applied.is_some() {
            return Ok(());
        }
        let current = self
            .client
            .query_opt(&format!("SELECT fence FROM {t} WHERE key = $1"), &[&key])
            .await
            .map_err(unavailable)?
            .map_or(0, |r| r.get::<_, i64>(0) as u64);
        Err(Error::Stale {
            key: key.to_string(),
            fence,
            current,
        })
    }
}

#[async_trait]
impl FencedResource for PostgresRegister {
    async fn write(&self, key: &str, value: &[u8], fence: u64) -> Result<()> {
        self.upsert(
            key,
            value,
            fence,
            "value = excluded.value, fence = excluded.fence",
        )
        .await
    }

    async fn claim(&self, key: &str, fence: u64) -> Result<()> {
        self.upsert(key, &[], fence, "fence = excluded.fence").await
    }

    async fn read(&self, key: &str) -> Result<Option<Fenced>> {
        let row = self
            .client
            .query_opt(
                &format!("SELECT value, fence FROM {} WHERE key = $1", self.table),
                &[&key],
            )
            .await
            .map_err(unavailable)?;
        Ok(row.map(|r| Fenced {
            value: r.get(0),
            fence: r.get::<_, i64>(1) as u64,
        }))
    }
}
