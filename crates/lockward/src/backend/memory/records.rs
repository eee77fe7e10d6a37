//! The memory store's records: two maps beside the lock slots.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::MemoryBackend;
use crate::backend::{RecordBackend, Versioned};
use crate::error::Result;
use crate::name::Name;

#[async_trait]
impl RecordBackend for MemoryBackend {
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool> {
        let now = Instant::now();
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        if records
            .get(key.as_str())
            .is_some_and(|(_, until)| *until > now)
        {
            return Ok(false);
        }
        records.insert(key.to_string(), (value.to_string(), now + ttl));
        Ok(true)
    }

    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()> {
        let until = Instant::now() + ttl;
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_string(), (value.to_string(), until));
        Ok(())
    }

    async fn record(&self, key: &Name) -> Result<Option<String>> {
        let now = Instant::now();
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        Ok(records
            .get(key.as_str())
            .filter(|(_, until)| *until > now)
            .map(|(value, _)| value.clone()))
    }

    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let now = Instant::now();
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        records.retain(|_, (_, until)| *until > now);
        Ok(records
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect())
    }

    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>> {
        let now = Instant::now();
        let versioned = self.versioned.lock().unwrap_or_else(|p| p.into_inner());
        Ok(versioned
            .get(key.as_str())
            .filter(|(_, _, until)| *until > now)
            .map(|(value, version, _)| Versioned {
                value: value.clone(),
                version: *version,
            }))
    }

    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let now = Instant::now();
        let mut versioned = self.versioned.lock().unwrap_or_else(|p| p.into_inner());
        let (current, last) = match versioned.get(key.as_str()) {
            Some((_, version, until)) if *until > now => (*version, *version),
            Some((_, version, _)) => (0, *version),
            None => (0, 0),
        };
        if current != expected {
            return Ok(None);
        }
        versioned.insert(key.to_string(), (value.to_string(), last + 1, now + ttl));
        Ok(Some(last + 1))
    }
}
