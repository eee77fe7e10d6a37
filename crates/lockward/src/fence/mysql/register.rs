//! Fenced writes to MySQL or MariaDB: one upsert whose assignments apply
//! only when the stored fence is not larger.

use async_trait::async_trait;
use mysql_async::Params;

use crate::backend::mysql::core::Db;
use crate::error::{Error, Result};
use crate::fence::{Fenced, FencedResource};
use crate::url::StoreUrl;

/// A table `(record_key, value, fence)` in the database of a `mysql://`
/// URL, created if missing.
///
/// ```no_run
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use lockward::fence::{FencedResource, MysqlRegister};
/// let stock = MysqlRegister::connect("mysql://app:pw@127.0.0.1/shop", "stock").await?;
/// stock.write("sku-42", b"17", 8).await?;
/// // A holder with an older fence is refused.
/// assert!(stock.write("sku-42", b"16", 7).await.is_err());
/// # Ok::<(), lockward::Error>(())
/// # });
/// ```
pub struct MysqlRegister {
    db: Db,
    table: String,
}

impl MysqlRegister {
    /// Connects to the server of `url` (a `mysql://` store URL; its
    /// `table=` is ignored) and opens `table` (a plain SQL name).
    /// Cancellation: dropping the future gives up the connection.
    pub async fn connect(url: &str, table: &str) -> Result<Self> {
        let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
        if table.is_empty() || table.len() > 64 || !table.chars().all(plain) {
            return Err(Error::invalid(
                "table",
                format!("{table:?} is not a plain SQL name"),
            ));
        }
        let StoreUrl::Mysql(parsed) = StoreUrl::parse(url)? else {
            return Err(Error::invalid(
                "url",
                "a MySQL register needs a mysql:// URL",
            ));
        };
        let db = Db::connect(&parsed).await?;
        db.batch(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (
                 record_key VARBINARY(512) NOT NULL PRIMARY KEY,
                 value      LONGBLOB NOT NULL,
                 fence      BIGINT UNSIGNED NOT NULL
             ) ENGINE=InnoDB"
        ))
        .await?;
        Ok(MysqlRegister {
            db,
            table: table.to_string(),
        })
    }

    /// One conditional upsert: `set` applies only when the stored fence is
    /// at most `fence` (a new key is inserted with `value`); otherwise
    /// [`Error::Stale`] with the stored fence.
    async fn upsert(&self, key: &str, value: &[u8], fence: u64, set: &str) -> Result<()> {
        let t = &self.table;
        let sql = format!(
            "INSERT INTO {t} (record_key, value, fence) VALUES (?, ?, ?)
             ON DUPLICATE KEY UPDATE {set}"
        );
        let params = Params::Positional(vec![key.as_bytes().into(), value.into(), fence.into()]);
        if self.db.exec(&sql, params).await?.rows > 0 {
            return Ok(());
        }
        // Nothing changed: refused, or the same write again.
        let current = self.read(key).await?.map_or(0, |f| f.fence);
        if current <= fence {
            return Ok(());
        }
        Err(Error::Stale {
            key: key.to_string(),
            fence,
            current,
        })
    }
}

#[async_trait]
impl FencedResource for MysqlRegister {
    async fn write(&self, key: &str, value: &[u8], fence: u64) -> Result<()> {
        // `fence` is assigned last: the test before it reads the stored one.
        let newer = "fence <= VALUES(fence)";
        let set = format!(
            "value = IF({newer}, VALUES(value), value), fence = IF({newer}, VALUES(fence), fence)"
        );
        self.upsert(key, value, fence, &set).await
    }

    async fn claim(&self, key: &str, fence: u64) -> Result<()> {
        let set = "fence = IF(fence <= VALUES(fence), VALUES(fence), fence)";
        self.upsert(key, &[], fence, set).await
    }

    async fn read(&self, key: &str) -> Result<Option<Fenced>> {
        let sql = format!(
            "SELECT value, fence FROM {} WHERE record_key = ?",
            self.table
        );
        let rows: Vec<(Vec<u8>, u64)> = self
            .db
            .rows(&sql, Params::Positional(vec![key.as_bytes().into()]))
            .await?;
        Ok(rows
            .into_iter()
            .next()
            .map(|(value, fence)| Fenced { value, fence }))
    }
}
