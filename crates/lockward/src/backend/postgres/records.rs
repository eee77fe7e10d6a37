//! PostgreSQL's records: the tables `TABLE_records` and `TABLE_versioned`
//! beside the lock table, shared by lease and advisory mode.

use std::time::Duration;

use async_trait::async_trait;

use super::core::Shared;
use crate::backend::time::millis;
use crate::backend::{RecordBackend, Versioned};
use crate::error::Result;
use crate::name::Name;

/// A PostgreSQL backend's connection and lock table, whose record tables
/// are named after it. Both modes implement it, and so the record seam.
pub(super) trait RecordTables: Send + Sync + 'static {
    /// The shared connection.
    fn shared(&self) -> &Shared;
    /// The lock table's name.
    fn table(&self) -> &str;
}

#[async_trait]
impl<T: RecordTables> RecordBackend for T {
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool> {
        let t = self.table();
        let sql = format!(
            "INSERT INTO {t}_records AS r (key, value, expires_at)
             VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 millisecond')
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
             WHERE r.expires_at <= clock_timestamp()
             RETURNING 1"
        );
        let rows = self
            .shared()
            .query(&sql, &[&key.as_str(), &value, &millis(ttl)])
            .await?;
        Ok(!rows.is_empty())
    }

    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()> {
        let t = self.table();
        let sql = format!(
            "INSERT INTO {t}_records AS r (key, value, expires_at)
             VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 millisecond')
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
        );
        self.shared()
            .query(&sql, &[&key.as_str(), &value, &millis(ttl)])
            .await
            .map(|_| ())
    }

    /// Stores `key` with the expiry `infinity`: never reached, never purged.
    async fn put_permanent_record(&self, key: &Name, value: &str) -> Result<()> {
        let t = self.table();
        let sql = format!(
            "INSERT INTO {t}_records AS r (key, value, expires_at) VALUES ($1, $2, 'infinity')
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
        );
        self.shared()
            .query(&sql, &[&key.as_str(), &value])
            .await
            .map(|_| ())
    }

    /// The live versioned record of `key`.
    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>> {
        let t = self.table();
        let sql = format!(
            "SELECT value, version FROM {t}_versioned
             WHERE key = $1 AND expires_at > clock_timestamp()"
        );
        let rows = self.shared().query(&sql, &[&key.as_str()]).await?;
        Ok(rows.first().map(|r| Versioned {
            value: r.get(0),
            version: r.get::<_, i64>(1) as u64,
        }))
    }

    /// One statement: for `expected` 0 an insert that may take over an
    /// expired row (its version keeps counting), else an update of the
    /// live row at that version. The new version is `max(version + 1, the
    /// server's clock in µs)`.
    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let t = self.table();
        // Versions grow as fences do, past a row brought back older.
        let clock = super::clock::CLOCK_FENCE;
        let sql = if expected == 0 {
            format!(
                "INSERT INTO {t}_versioned AS r (key, value, version, expires_at)
                 VALUES ($1, $2, {clock}, clock_timestamp() + $3::bigint * interval '1 millisecond')
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value,
                     version = greatest(r.version + 1, {clock}), expires_at = excluded.expires_at
                 WHERE r.expires_at <= clock_timestamp() AND $4::bigint = 0
                 RETURNING version"
            )
        } else {
            format!(
                "UPDATE {t}_versioned SET value = $2, version = greatest(version + 1, {clock}),
                     expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
                 WHERE key = $1 AND version = $4::bigint AND expires_at > clock_timestamp()
                 RETURNING version"
            )
        };
        let rows = self
            .shared()
            .query(
                &sql,
                &[&key.as_str(), &value, &millis(ttl), &(expected as i64)],
            )
            .await?;
        Ok(rows.first().map(|r| r.get::<_, i64>(0) as u64))
    }

    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let t = self.table();
        let sql = format!(
            "SELECT key, value FROM {t}_records
             WHERE starts_with(key, $1) AND expires_at > clock_timestamp() ORDER BY key"
        );
        let rows = self.shared().query(&sql, &[&prefix]).await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    async fn record(&self, key: &Name) -> Result<Option<String>> {
        let t = self.table();
        let sql = format!(
            "SELECT value FROM {t}_records WHERE key = $1 AND expires_at > clock_timestamp()"
        );
        let rows = self.shared().query(&sql, &[&key.as_str()]).await?;
        Ok(rows.first().map(|r| r.get(0)))
    }
}
