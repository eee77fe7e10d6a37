//! Fenced writes to a SQLite table: the classic conditional `UPDATE`, made
//! one upsert so a missing row is inserted in the same step.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use super::{Fenced, FencedResource};
use crate::error::{Error, Result};

/// A table `(key TEXT PRIMARY KEY, value BLOB, fence INTEGER)` in a SQLite
/// file, created if missing.
#[derive(Debug, Clone)]
pub struct SqliteRegister {
    table: String,
    conn: Arc<Mutex<Connection>>,
}

impl SqliteRegister {
    /// Opens `path` and the table `table` (a plain SQL name).
    ///
    /// Cancellation: dropping the future stops opening the file; a table it
    /// created stays.
    pub async fn open(path: &Path, table: &str) -> Result<Self> {
        if table.is_empty() || !table.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::invalid(
                "table",
                format!("{table:?} is not a plain SQL name"),
            ));
        }
        let (path, table) = (path.to_path_buf(), table.to_string());
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value BLOB NOT NULL, fence INTEGER NOT NULL)"
        );
        let shown = path.display().to_string();
        let conn = tokio::task::spawn_blocking(move || {
            let conn = Connection::open(&path)?;
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.execute_batch(&create)?;
            Ok::<_, rusqlite::Error>(conn)
        })
        .await
        .map_err(|e| unavailable(&shown, e.to_string()))?
        .map_err(|e| unavailable(&shown, e.to_string()))?;
        Ok(SqliteRegister {
            table,
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection, &str) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let (conn, table) = (self.conn.clone(), self.table.clone());
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&conn, &table)
        })
        .await
        .map_err(|e| unavailable("sqlite register", e.to_string()))?
        .map_err(|e| unavailable("sqlite register", e.to_string()))
    }
}

fn unavailable(address: &str, message: String) -> Error {
    Error::Unavailable {
        address: address.to_string(),
        message,
        cause: None,
    }
}

impl SqliteRegister {
    /// One conditional upsert: `set` applies only when `fence` is at least
    /// the stored one (a new key is inserted with `value`); otherwise
    /// [`Error::Stale`] with the stored fence.
    async fn upsert(&self, key: &str, value: &[u8], fence: u64, set: &'static str) -> Result<()> {
        let (k, v) = (key.to_string(), value.to_vec());
        let fence_sql =
            i64::try_from(fence).map_err(|_| Error::invalid("fence", "above i64::MAX"))?;
        let refused = self
            .run(move |conn, t| {
                let changed = conn
                    .prepare_cached(&format!(
                        "INSERT INTO {t} (key, value, fence) VALUES (?1, ?2, ?3)
                         ON CONFLICT (key) DO UPDATE SET {set}
                         WHERE fence <= excluded.fence"
                    ))?
                    .execute(params![k, v, fence_sql])?;
                if changed == 1 {
                    return Ok(None);
                }
                conn.prepare_cached(&format!("SELECT fence FROM {t} WHERE key = ?1"))?
                    .query_row([&k], |r| r.get::<_, i64>(0))
                    .optional()
            })
            .await?;
        match refused {
            None => Ok(()),
            Some(current) => Err(Error::Stale {
                key: key.to_string(),
                fence,
                current: current as u64,
            }),
        }
    }
}

#[async_trait]
impl FencedResource for SqliteRegister {
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
        let k = key.to_string();
        self.run(move |conn, t| {
            conn.prepare_cached(&format!("SELECT value, fence FROM {t} WHERE key = ?1"))?
                .query_row([&k], |r| {
                    Ok(Fenced {
                        value: r.get(0)?,
                        fence: r.get::<_, i64>(1)? as u64,
                    })
                })
                .optional()
        })
        .await
    }
}
