//! MySQL's records: the tables `TABLE_records` and `TABLE_versioned`
//! beside the lock table. Rows are upserts judged the way the lock table's
//! are (see [`super::mutex`]): the expiry test and the write are one step
//! on the locked row, `expires_at` assigned last.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::Params;

use super::core::{like_prefix, name_param, Db};
use crate::backend::time::micros;
use crate::backend::{RecordBackend, Versioned};
use crate::error::Result;
use crate::name::Name;

/// The record tables of one lock table, on its pool. Both modes keep one
/// and hand the record seam to it (see [`delegate_records`]).
pub(super) struct Records {
    db: Arc<Db>,
    table: String,
}

impl Records {
    pub(super) fn new(db: Arc<Db>, table: &str) -> Records {
        Records {
            db,
            table: table.to_string(),
        }
    }

    fn db(&self) -> &Db {
        &self.db
    }

    fn table(&self) -> &str {
        &self.table
    }
}

/// Implements the record seam for a backend type by handing each call to
/// its `records` field.
macro_rules! delegate_records {
    ($backend:ty) => {
        #[async_trait::async_trait]
        impl crate::backend::RecordBackend for $backend {
            async fn insert_record(
                &self,
                key: &crate::name::Name,
                value: &str,
                ttl: std::time::Duration,
            ) -> crate::error::Result<bool> {
                self.records.insert_record(key, value, ttl).await
            }

            async fn put_record(
                &self,
                key: &crate::name::Name,
                value: &str,
                ttl: std::time::Duration,
            ) -> crate::error::Result<()> {
                self.records.put_record(key, value, ttl).await
            }

            async fn put_permanent_record(
                &self,
                key: &crate::name::Name,
                value: &str,
            ) -> crate::error::Result<()> {
                self.records.put_permanent_record(key, value).await
            }

            async fn record(
                &self,
                key: &crate::name::Name,
            ) -> crate::error::Result<Option<String>> {
                self.records.record(key).await
            }

            async fn records(&self, prefix: &str) -> crate::error::Result<Vec<(String, String)>> {
                self.records.records(prefix).await
            }

            async fn read_versioned(
                &self,
                key: &crate::name::Name,
            ) -> crate::error::Result<Option<crate::backend::Versioned>> {
                self.records.read_versioned(key).await
            }

            async fn write_versioned(
                &self,
                key: &crate::name::Name,
                expected: u64,
                value: &str,
                ttl: std::time::Duration,
            ) -> crate::error::Result<Option<u64>> {
                self.records
                    .write_versioned(key, expected, value, ttl)
                    .await
            }
        }
    };
}
pub(super) use delegate_records;

/// An expiry never reached: records kept forever.
const NEVER: &str = "9999-12-31 00:00:00";

/// Key, value and TTL as parameters.
fn record(key: &Name, value: &str, ttl: Duration) -> Params {
    Params::Positional(vec![
        key.as_str().as_bytes().into(),
        value.into(),
        micros(ttl).into(),
    ])
}

#[async_trait]
impl RecordBackend for Records {
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool> {
        let t = self.table();
        let free = "expires_at <= UTC_TIMESTAMP(6)";
        let sql = format!(
            "INSERT INTO {t}_records (record_key, record_value, expires_at)
             VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
             ON DUPLICATE KEY UPDATE
                 record_value = IF({free}, VALUES(record_value), record_value),
                 expires_at = IF({free}, VALUES(expires_at), expires_at)"
        );
        let changed = self.db().exec(&sql, record(key, value, ttl)).await?;
        Ok(changed.rows > 0)
    }

    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()> {
        let t = self.table();
        let sql = format!(
            "INSERT INTO {t}_records (record_key, record_value, expires_at)
             VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
             ON DUPLICATE KEY UPDATE record_value = VALUES(record_value),
                 expires_at = VALUES(expires_at)"
        );
        self.db()
            .exec(&sql, record(key, value, ttl))
            .await
            .map(drop)
    }

    async fn put_permanent_record(&self, key: &Name, value: &str) -> Result<()> {
        let t = self.table();
        let sql = format!(
            "INSERT INTO {t}_records (record_key, record_value, expires_at) VALUES (?, ?, '{NEVER}')
             ON DUPLICATE KEY UPDATE record_value = VALUES(record_value),
                 expires_at = VALUES(expires_at)"
        );
        let params = Params::Positional(vec![key.as_str().as_bytes().into(), value.into()]);
        self.db().exec(&sql, params).await.map(drop)
    }

    async fn record(&self, key: &Name) -> Result<Option<String>> {
        let t = self.table();
        let sql = format!(
            "SELECT record_value FROM {t}_records
             WHERE record_key = ? AND expires_at > UTC_TIMESTAMP(6)"
        );
        let rows: Vec<String> = self.db().rows(&sql, name_param(key)).await?;
        Ok(rows.into_iter().next())
    }

    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let t = self.table();
        let sql = format!(
            "SELECT record_key, record_value FROM {t}_records
             WHERE record_key LIKE ? ESCAPE '|' AND expires_at > UTC_TIMESTAMP(6)
             ORDER BY record_key"
        );
        let params = Params::Positional(vec![like_prefix(prefix).into()]);
        let rows: Vec<(Vec<u8>, String)> = self.db().rows(&sql, params).await?;
        Ok(rows
            .into_iter()
            .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v))
            .collect())
    }

    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>> {
        let t = self.table();
        let sql = format!(
            "SELECT record_value, version FROM {t}_versioned
             WHERE record_key = ? AND expires_at > UTC_TIMESTAMP(6)"
        );
        let rows: Vec<(String, u64)> = self.db().rows(&sql, name_param(key)).await?;
        Ok(rows
            .into_iter()
            .next()
            .map(|(value, version)| Versioned { value, version }))
    }

    /// One statement: for `expected` 0 an upsert that may take over an
    /// expired row (its version keeps counting), else an update of the live
    /// row at that version. The new version, `max(version + 1, the
    /// server's clock in µs)`, comes back as the statement's
    /// `LAST_INSERT_ID`.
    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let t = self.table();
        let free = "expires_at <= UTC_TIMESTAMP(6)";
        // Versions grow as fences do, past a row brought back older.
        let clock = super::core::CLOCK_US;
        let next = format!("GREATEST(version + 1, {clock})");
        let (sql, params) = if expected == 0 {
            let sql = format!(
                "INSERT INTO {t}_versioned (record_key, record_value, version, expires_at)
                 VALUES (?, ?, LAST_INSERT_ID({clock}), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
                 ON DUPLICATE KEY UPDATE
                     version = IF({free}, LAST_INSERT_ID({next}), version),
                     record_value = IF({free}, VALUES(record_value), record_value),
                     expires_at = IF({free}, VALUES(expires_at), expires_at)"
            );
            (sql, record(key, value, ttl))
        } else {
            let sql = format!(
                "UPDATE {t}_versioned SET version = LAST_INSERT_ID({next}),
                     record_value = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
                 WHERE record_key = ? AND version = ? AND expires_at > UTC_TIMESTAMP(6)"
            );
            let params = Params::Positional(vec![
                value.into(),
                micros(ttl).into(),
                key.as_str().as_bytes().into(),
                expected.into(),
            ]);
            (sql, params)
        };
        let changed = self.db().exec(&sql, params).await?;
        // Inserted or updated, LAST_INSERT_ID(…) is the new version.
        Ok(match changed.rows {
            0 => None,
            _ => changed.last_insert_id,
        })
    }
}
