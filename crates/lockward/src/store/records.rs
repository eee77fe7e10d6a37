//! The record operations of a [`Store`]: what recipes and tools use to keep
//! small values beside the locks, always by exact key or by prefix, with
//! every key and TTL checked first.

use std::time::Duration;

use crate::backend::Versioned;
use crate::duration::check_retention;
use crate::error::{Error, Result};
use crate::name::Name;

use super::Store;

impl Store {
    /// The live record of `key`, read by its exact key.
    ///
    /// Cancellation: dropping the future changes nothing.
    pub async fn record(&self, key: &str) -> Result<Option<String>> {
        self.backend.record(&Name::new(key)?).await
    }

    /// Stores `value` as the record of `key` for `ttl`, unless `key` has a
    /// live record already; `true` when this call stored it.
    ///
    /// A cancelled call may or may not have stored the record.
    ///
    /// Cancellation: the record may or may not have been inserted; read it to
    /// know.
    pub async fn insert_record(&self, key: &str, value: &str, ttl: Duration) -> Result<bool> {
        let ttl = check_retention(ttl)?;
        self.backend
            .insert_record(&Name::new(key)?, value, ttl)
            .await
    }

    /// Stores or replaces the record of `key`, to live for `ttl`.
    ///
    /// A cancelled call may or may not have stored the record.
    ///
    /// Cancellation: the record may or may not have been written.
    pub async fn put_record(&self, key: &str, value: &str, ttl: Duration) -> Result<()> {
        let ttl = check_retention(ttl)?;
        self.backend.put_record(&Name::new(key)?, value, ttl).await
    }

    /// Stores or replaces the record of `key`, kept forever. Only where
    /// the store declares `permanent_records` (SQLite, PostgreSQL):
    /// elsewhere [`Error::NotSupported`], since records there live in
    /// memory or under a storage quota.
    ///
    /// A cancelled call may or may not have stored the record.
    ///
    /// Cancellation: the record may or may not have been written.
    pub async fn put_permanent_record(&self, key: &str, value: &str) -> Result<()> {
        let key = Name::new(key)?;
        if !self.capabilities().permanent_records {
            return Err(self.cannot_keep_forever());
        }
        self.backend.put_permanent_record(&key, value).await
    }

    /// The refusal of a permanent record on a store that cannot keep one.
    pub(crate) fn cannot_keep_forever(&self) -> Error {
        Error::NotSupported {
            address: self.address(),
            what: "keeping a record forever",
            why: "this store keeps records in memory or under a storage quota; \
                  use SQLite or PostgreSQL for permanent records, or keep them for a retention",
        }
    }

    /// Every live record whose key starts with `prefix`, sorted by key: for
    /// ledgers and status views (it lists; point reads use [`record`](Self::record)).
    ///
    /// Cancellation: dropping the future changes nothing.
    pub async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        self.backend.records(prefix).await
    }

    /// The versioned record of `key`, unless it does not exist or expired.
    ///
    /// Cancellation: dropping the future changes nothing.
    pub async fn read_versioned(&self, key: &str) -> Result<Option<Versioned>> {
        self.backend.read_versioned(&Name::new(key)?).await
    }

    /// Writes the versioned record of `key` if its version is still
    /// `expected` (0: absent or expired), to live for `ttl`; the new version,
    /// or `None` when another write came first.
    ///
    /// A cancelled call may or may not have written; read again to know.
    ///
    /// Cancellation: the write may or may not have landed; read the version to
    /// know.
    pub async fn write_versioned(
        &self,
        key: &str,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let ttl = check_retention(ttl)?;
        self.backend
            .write_versioned(&Name::new(key)?, expected, value, ttl)
            .await
    }
}
