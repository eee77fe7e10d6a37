//! The SQLite store's records: the tables `lockward_records` and
//! `lockward_versioned`, expiring on the boot clock like the locks.

use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::{host_clock, millis, SqliteBackend};
use crate::backend::{RecordBackend, Versioned};
use crate::error::Result;
use crate::name::Name;

#[async_trait]
impl RecordBackend for SqliteBackend {
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool> {
        let (key, value, ttl) = (key.to_string(), value.to_string(), millis(ttl));
        self.run(move |conn| {
            // Expiry is on the boot clock, like the locks': a reboot drops them.
            let now = host_clock::now_ms();
            conn.prepare_cached(
                "INSERT INTO lockward_records (key, value, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
                 WHERE expires_at <= ?4",
            )?
            .execute(params![key, value, now + ttl, now])
            .map(|n| n == 1)
        })
        .await
    }

    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()> {
        let (key, value, ttl) = (key.to_string(), value.to_string(), millis(ttl));
        self.run(move |conn| {
            conn.prepare_cached(
                "INSERT INTO lockward_records (key, value, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
            )?
            .execute(params![key, value, host_clock::now_ms() + ttl])
            .map(|_| ())
        })
        .await
    }

    async fn put_permanent_record(&self, key: &Name, value: &str) -> Result<()> {
        let (key, value) = (key.to_string(), value.to_string());
        self.run(move |conn| {
            // The largest expiry there is: never reached, never purged.
            conn.prepare_cached(
                "INSERT INTO lockward_records (key, value, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
            )?
            .execute(params![key, value, i64::MAX])
            .map(|_| ())
        })
        .await
    }

    async fn record(&self, key: &Name) -> Result<Option<String>> {
        let key = key.to_string();
        self.run(move |conn| {
            conn.prepare_cached(
                "SELECT value FROM lockward_records WHERE key = ?1 AND expires_at > ?2",
            )?
            .query_row(params![key, host_clock::now_ms()], |r| r.get(0))
            .optional()
        })
        .await
    }

    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>> {
        let key = key.to_string();
        self.run(move |conn| {
            conn.prepare_cached(
                "SELECT value, version FROM lockward_versioned WHERE key = ?1 AND expires_at > ?2",
            )?
            .query_row(params![key, host_clock::now_ms()], |r| {
                Ok(Versioned {
                    value: r.get(0)?,
                    version: r.get::<_, i64>(1)? as u64,
                })
            })
            .optional()
        })
        .await
    }

    /// One statement: for `expected` 0 an insert that may take over an
    /// expired row, else an update of the live row at that version. An
    /// expired row keeps counting its versions; each is `max(version + 1,
    /// the wall clock in µs)`, so a file restored from an older copy does
    /// not give a version out again.
    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let (key, value, ttl) = (key.to_string(), value.to_string(), millis(ttl));
        let expected = expected as i64;
        self.run(move |conn| {
            let now = host_clock::now_ms();
            let sql = if expected == 0 {
                "INSERT INTO lockward_versioned (key, value, version, expires_at)
                 VALUES (?1, ?2, max(1, ?6), ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value,
                     version = max(lockward_versioned.version + 1, ?6),
                     expires_at = excluded.expires_at
                 WHERE lockward_versioned.expires_at <= ?5 AND ?4 = 0
                 RETURNING version"
            } else {
                "UPDATE lockward_versioned SET value = ?2, version = max(version + 1, ?6),
                     expires_at = ?3
                 WHERE key = ?1 AND version = ?4 AND expires_at > ?5
                 RETURNING version"
            };
            conn.prepare_cached(sql)?
                .query_row(
                    params![key, value, now + ttl, expected, now, host_clock::wall_us()],
                    |r| r.get::<_, i64>(0),
                )
                .optional()
                .map(|v| v.map(|v| v as u64))
        })
        .await
    }

    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let prefix = prefix.to_string();
        self.run(move |conn| {
            let now = host_clock::now_ms();
            conn.prepare_cached("DELETE FROM lockward_records WHERE expires_at <= ?1")?
                .execute([now])?;
            let mut stmt = conn.prepare_cached(
                "SELECT key, value FROM lockward_records
                 WHERE substr(key, 1, length(?1)) = ?1 ORDER BY key",
            )?;
            let rows = stmt.query_map([&prefix], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
        .await
    }
}
