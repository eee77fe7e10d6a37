//! etcd's records: keys under the prefix's record and versioned spaces,
//! each with a lease of the record's TTL (see [`keys`](super::keys)).

use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};

use super::core::EtcdBackend;
use super::keys;
use crate::backend::{RecordBackend, Versioned};
use crate::error::Result;
use crate::name::Name;

#[async_trait]
impl RecordBackend for EtcdBackend {
    /// Each record has a lease of its own, with the record's TTL.
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool> {
        let record = keys::record_key(&self.prefix, key.as_str());
        let first = Compare::create_revision(record.clone(), CompareOp::Equal, 0);
        Ok(self.put_if(first, record, value, ttl).await?.is_some())
    }

    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()> {
        let record = keys::record_key(&self.prefix, key.as_str());
        let lease = self.grant(ttl).await?;
        self.call(|mut c| {
            let (record, value) = (record.clone(), value.to_string());
            async move {
                c.put(record, value, Some(PutOptions::new().with_lease(lease)))
                    .await
            }
        })
        .await
        .map(|_| ())
    }

    /// One range request for exactly the record's key.
    async fn record(&self, key: &Name) -> Result<Option<String>> {
        let record = keys::record_key(&self.prefix, key.as_str());
        let resp = self
            .call(|mut c| {
                let record = record.clone();
                async move { c.get(record, None).await }
            })
            .await?;
        Ok(resp
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
    }

    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let range = keys::record_key(&self.prefix, prefix);
        let head = keys::record_key(&self.prefix, "");
        let resp = self
            .call(|mut c| {
                let range = range.clone();
                async move { c.get(range, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let mut out: Vec<(String, String)> = resp
            .kvs()
            .iter()
            .filter_map(|kv| {
                let key = std::str::from_utf8(kv.key())
                    .ok()?
                    .strip_prefix(head.as_str())?;
                Some((
                    keys::unescape(key)?,
                    String::from_utf8_lossy(kv.value()).into_owned(),
                ))
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// The version is the key's mod revision: global, so it only grows,
    /// also when the key expired (its lease ended) and was created again.
    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>> {
        let k = keys::versioned_key(&self.prefix, key.as_str());
        let resp = self
            .call(|mut c| {
                let k = k.clone();
                async move { c.get(k, None).await }
            })
            .await?;
        Ok(resp.kvs().first().map(|kv| Versioned {
            value: String::from_utf8_lossy(kv.value()).into_owned(),
            version: kv.mod_revision() as u64,
        }))
    }

    /// A transaction on the mod revision (0 for a missing key), with a
    /// lease of the record's TTL.
    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let k = keys::versioned_key(&self.prefix, key.as_str());
        let unchanged = Compare::mod_revision(k.clone(), CompareOp::Equal, expected as i64);
        self.put_if(unchanged, k, value, ttl).await
    }
}

impl EtcdBackend {
    /// Puts `value` at `key` with a lease of its own (the record's TTL) if
    /// `compare` holds: `Some(revision of the write)` then, `None` when it
    /// did not hold (the unused lease is revoked at once, not left to its
    /// TTL).
    async fn put_if(
        &self,
        compare: Compare,
        key: String,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let lease = self.grant(ttl).await?;
        let put = TxnOp::put(key, value, Some(PutOptions::new().with_lease(lease)));
        let txn = Txn::new().when([compare]).and_then([put]);
        let resp = self
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        if !resp.succeeded() {
            let _ = self
                .call(|mut c| async move { c.lease_revoke(lease).await })
                .await;
            return Ok(None);
        }
        let revision = resp
            .header()
            .map(|h| h.revision() as u64)
            .ok_or_else(|| self.protocol("a transaction reply without a header"))?;
        Ok(Some(revision))
    }
}
