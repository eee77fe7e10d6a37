//! The record seam: the small key-value storage the recipes keep beside
//! the locks (idempotency results, run-once marks, the cron ledger, rate
//! limits and optimistic updates).

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::name::Name;

/// The record operations of a store: the second of the two seams a backend
/// implements (the first is [`LockBackend`](super::LockBackend)).
///
/// Record keys never collide with lock names, and plain records are kept
/// apart from versioned ones. Each call is one atomic operation on the
/// store; a cancelled call may or may not have been applied.
#[async_trait]
pub trait RecordBackend: Send + Sync + 'static {
    /// Stores a record (for recipes: the cron ledger) unless `key` already
    /// has one; `true` when this call stored it. The record lives for `ttl`
    /// (etcd: between `ttl`/2 and `ttl`, see its docs). Record keys never
    /// collide with lock keys.
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool>;

    /// Stores or replaces the record of `key`.
    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()>;

    /// Stores or replaces the record of `key`, kept forever. Only stores
    /// that declare `permanent_records` implement it; [`Store`](crate::Store)
    /// refuses the others before calling.
    async fn put_permanent_record(&self, key: &Name, _value: &str) -> Result<()> {
        Err(crate::Error::invalid(
            "retention",
            format!("record {key}: this store cannot keep records forever"),
        ))
    }

    /// The live record of `key`, read by its exact key (never by listing).
    async fn record(&self, key: &Name) -> Result<Option<String>>;

    /// Every live record whose key starts with `prefix`, sorted by key:
    /// for ledgers and status views, not for point reads.
    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>>;

    /// The versioned record of `key` (for optimistic updates and rate
    /// limits), unless it does not exist or its TTL passed. Versioned
    /// records are kept apart from plain records and locks.
    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>>;

    /// Writes the versioned record of `key` if its version is still
    /// `expected` (0: it does not exist or expired), to live for `ttl`.
    /// Returns the new version, or `None` when another write came first.
    /// Versions only grow, across expiry too, so a stale `expected` never
    /// matches a newer record.
    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>>;
}

/// A versioned record: its value and the version a conditional write must
/// name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The stored value.
    pub value: String,
    /// Its version, above 0.
    pub version: u64,
}
