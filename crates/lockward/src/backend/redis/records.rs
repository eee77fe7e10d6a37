//! Redis's records: plain keys with a `PX` TTL, and versioned hashes
//! written by a script (see [`keys`](super::keys)).

use std::time::Duration;

use async_trait::async_trait;

use super::core::RedisBackend;
use super::{conn, keys};
use crate::backend::time::ttl_millis;
use crate::backend::{RecordBackend, Versioned};
use crate::error::Result;
use crate::name::Name;
use crate::owner::OwnerId;

#[async_trait]
impl RecordBackend for RedisBackend {
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool> {
        let stored: Option<String> = redis::cmd("SET")
            .arg(keys::record_key(&self.prefix, key, self.cluster))
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(ttl_millis(ttl))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.unavailable(e))?;
        Ok(stored.is_some())
    }

    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()> {
        redis::cmd("SET")
            .arg(keys::record_key(&self.prefix, key, self.cluster))
            .arg(value)
            .arg("PX")
            .arg(ttl_millis(ttl))
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(|e| self.unavailable(e))
    }

    async fn record(&self, key: &Name) -> Result<Option<String>> {
        redis::cmd("GET")
            .arg(keys::record_key(&self.prefix, key, self.cluster))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.unavailable(e))
    }

    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let pattern = keys::scan_pattern(&self.prefix, prefix, self.cluster);
        let found = conn::scan_all(&self.conn, &pattern)
            .await
            .map_err(|e| self.unavailable(e))?;
        let mut out = Vec::new();
        for key in found {
            let Some(record) = key
                .strip_prefix(self.prefix.as_str())
                .and_then(|k| keys::record_of(k, self.cluster))
            else {
                continue;
            };
            let value: Option<String> = redis::cmd("GET")
                .arg(&key)
                .query_async(&mut self.conn.clone())
                .await
                .map_err(|e| self.unavailable(e))?;
            if let Some(value) = value {
                out.push((record, value));
            }
        }
        out.sort();
        Ok(out)
    }

    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>> {
        let (version, value): (Option<u64>, Option<String>) = redis::cmd("HMGET")
            .arg(keys::versioned_key(&self.prefix, key, self.cluster))
            .arg("v")
            .arg("d")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.unavailable(e))?;
        Ok(match (version, value) {
            (Some(version), Some(value)) => Some(Versioned { value, version }),
            _ => None,
        })
    }

    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let mut call = self.scripts.write_versioned.prepare_invoke();
        call.key(keys::versioned_key(&self.prefix, key, self.cluster))
            .arg(expected)
            .arg(value)
            .arg(ttl_millis(ttl))
            .arg(OwnerId::random().to_string());
        let (version, _): (u64, bool) = self.invoke(&call).await?;
        Ok((version > 0).then_some(version))
    }
}
