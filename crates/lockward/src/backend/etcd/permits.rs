//! Semaphores kept by etcd: a key per holder on the holder's own lease,
//! and a count of taken permits beside them, changed together by one
//! transaction, so a permit costs the same however many hold one.
//!
//! For a semaphore `N` under prefix `P` (U+0001 keeps these keys apart
//! from every lock's, as records are):
//!
//! | key | holds |
//! | --- | --- |
//! | `P` + U+0001 + `semaphores/` + esc(N) + `/taken` | permits taken by the holders counted |
//! | `P` + U+0001 + `semaphores/` + esc(N) + `/h/` + lease id (hex) | a holder: the permits it took, on its lease |
//!
//! - **Take**: grant a lease, then one transaction: if the count is still
//!   at the revision read, write it plus `k` and put the holder's key; on a
//!   conflict, the transaction returns the new count to try again with. The
//!   fence is the holder key's create revision (revisions only grow).
//! - **Give back**: one transaction deletes the key and lowers the count
//!   (on the revisions read), then the lease is revoked. **Renewal** is a
//!   keep-alive of the lease, as for a lock.
//! - **Expiry** deletes a holder's key with its lease but cannot lower the
//!   count, so the count is never below what live holders took. When
//!   permits seem short, the holders are counted at one revision and the
//!   count set to that (on its revision), which is how a crashed holder's
//!   permits come back: a cost paid only when the semaphore runs short.

use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Compare, CompareOp, GetOptions, KeyValue, PutOptions, Txn, TxnOp, TxnOpResponse,
};

use super::keys::{escape, unescape};
use super::mutex::{lease_seconds, EtcdBackend, Held};
use crate::backend::{holder_row, no_permits, LockBackend, PermitBackend, Request};
use crate::error::{Error, Result};
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

/// How often a write of the count may meet a conflicting one before the
/// caller is told the semaphore is contended.
const WRITE_TRIES: u32 = 1_000;

/// The pause after a conflicting write of the count: every write that
/// loses still costs the cluster a round of consensus, so many writers
/// retrying in step would slow the winners down. Anywhere up to a cap that
/// doubles with each loss (200 µs to 8 ms), which spreads them out.
struct ConflictBackoff(Duration);

fn conflict_backoff() -> ConflictBackoff {
    ConflictBackoff(Duration::from_micros(200))
}

impl ConflictBackoff {
    fn next_delay(&mut self) -> Duration {
        let cap = self.0;
        self.0 = (cap * 2).min(Duration::from_millis(8));
        cap.mul_f64(fastrand::f64())
    }
}

/// The keys of one semaphore.
struct SemKeys {
    taken: String,
    holders: String,
}

impl SemKeys {
    fn holder(&self, lease: i64) -> String {
        format!("{}{lease:x}", self.holders)
    }
}

/// The count as read: permits and the revision a write must name (0:
/// no count yet).
#[derive(Clone, Copy)]
struct Count {
    taken: u64,
    revision: i64,
}

impl Count {
    fn of(kv: Option<&KeyValue>) -> Count {
        Count {
            taken: kv
                .and_then(|kv| kv.value_str().ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            revision: kv.map_or(0, |kv| kv.mod_revision()),
        }
    }
}

fn first_kv(response: Option<&TxnOpResponse>) -> Option<&KeyValue> {
    match response {
        Some(TxnOpResponse::Get(g)) => g.kvs().first(),
        _ => None,
    }
}

fn permits_of(kv: &KeyValue) -> u64 {
    kv.value_str()
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl EtcdBackend {
    fn sem_keys(&self, name: &Name) -> SemKeys {
        let base = format!("{}\u{1}semaphores/{}", self.prefix, escape(name.as_str()));
        SemKeys {
            taken: format!("{base}/taken"),
            holders: format!("{base}/h/"),
        }
    }

    async fn txn(&self, txn: Txn) -> Result<etcd_client::TxnResponse> {
        self.call(|mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await
    }

    /// The count alone.
    async fn count(&self, keys: &SemKeys) -> Result<Count> {
        let key = keys.taken.clone();
        let resp = self
            .call(|mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(Count::of(resp.kvs().first()))
    }

    /// The count and the permits of every live holder, at one revision.
    async fn recount(&self, keys: &SemKeys) -> Result<(Count, u64)> {
        let resp = self
            .txn(Txn::new().and_then([
                TxnOp::get(keys.taken.clone(), None),
                TxnOp::get(keys.holders.clone(), Some(GetOptions::new().with_prefix())),
            ]))
            .await?;
        let count = Count::of(first_kv(resp.op_responses().first()));
        let live = match resp.op_responses().get(1) {
            Some(TxnOpResponse::Get(g)) => g.kvs().iter().map(permits_of).sum(),
            _ => 0,
        };
        Ok((count, live))
    }

    /// Sets the count to what live holders took when it says more, on the
    /// count's revision; the count as it is afterwards.
    async fn settle(&self, keys: &SemKeys) -> Result<Count> {
        for _ in 0..WRITE_TRIES {
            let (count, live) = self.recount(keys).await?;
            if live >= count.taken {
                return Ok(count);
            }
            let resp = self
                .txn(
                    Txn::new()
                        .when([Compare::mod_revision(
                            keys.taken.clone(),
                            CompareOp::Equal,
                            count.revision,
                        )])
                        .and_then([TxnOp::put(keys.taken.clone(), live.to_string(), None)]),
                )
                .await?;
            if resp.succeeded() {
                let revision = resp.header().map_or(0, |h| h.revision());
                return Ok(Count {
                    taken: live,
                    revision,
                });
            }
        }
        Err(self.contended(keys))
    }

    fn contended(&self, keys: &SemKeys) -> Error {
        Error::Contended {
            key: keys.taken.clone(),
            tries: WRITE_TRIES,
        }
    }
}

#[async_trait]
impl PermitBackend for EtcdBackend {
    async fn take_permits(&self, req: &Request<'_>, of: u32, take: u32) -> Result<u64> {
        let keys = self.sem_keys(req.name);
        let lease = self.grant(req.ttl).await?;
        let holder = keys.holder(lease);
        let mut count = self.count(&keys).await?;
        let mut backoff = conflict_backoff();
        for _ in 0..WRITE_TRIES {
            if count.taken + u64::from(take) > u64::from(of) {
                count = self.settle(&keys).await?;
                if count.taken + u64::from(take) > u64::from(of) {
                    let _ = self.revoke(lease).await;
                    let free = u64::from(of).saturating_sub(count.taken);
                    return Err(no_permits(req.name.as_str(), take, free, of));
                }
            }
            let resp = self
                .txn(
                    Txn::new()
                        .when([Compare::mod_revision(
                            keys.taken.clone(),
                            CompareOp::Equal,
                            count.revision,
                        )])
                        .and_then([
                            TxnOp::put(
                                keys.taken.clone(),
                                (count.taken + u64::from(take)).to_string(),
                                None,
                            ),
                            TxnOp::put(
                                holder.clone(),
                                take.to_string(),
                                Some(PutOptions::new().with_lease(lease)),
                            ),
                        ])
                        .or_else([TxnOp::get(holder.clone(), None)]),
                )
                .await?;
            // A retried call whose first run applied finds its own key.
            let fence = if resp.succeeded() {
                resp.header().map(|h| h.revision())
            } else {
                first_kv(resp.op_responses().first()).map(|kv| kv.create_revision())
            };
            if let Some(fence) = fence.filter(|f| *f > 0) {
                self.leases().insert(
                    (req.name.clone(), req.owner),
                    Held {
                        lease,
                        key: holder,
                        ttl_secs: lease_seconds(req.ttl),
                    },
                );
                return Ok(fence as u64);
            }
            // Lost to another write: pause, then read the count afresh
            // (the one the failed write returned is stale by then).
            tokio::time::sleep(backoff.next_delay()).await;
            count = self.count(&keys).await?;
        }
        let _ = self.revoke(lease).await;
        Err(self.contended(&keys))
    }

    async fn extend_permits(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        // The holder's lease and key are kept as a lock's are.
        LockBackend::extend(self, name, owner, ttl).await
    }

    async fn release_permits(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let Some(held) = self.leases().remove(&(name.clone(), owner)) else {
            return Err(not_owner());
        };
        let keys = self.sem_keys(name);
        let read = [
            TxnOp::get(keys.taken.clone(), None),
            TxnOp::get(held.key.clone(), None),
        ];
        let mut resp = self.txn(Txn::new().and_then(read.clone())).await?;
        let mut backoff = conflict_backoff();
        for _ in 0..WRITE_TRIES {
            let count = Count::of(first_kv(resp.op_responses().first()));
            let Some(mine) = first_kv(resp.op_responses().get(1)).cloned() else {
                // Its lease ran out: the key went with it (the count is
                // set right when the semaphore next runs short).
                return Err(not_owner());
            };
            resp = self
                .txn(
                    Txn::new()
                        .when([
                            Compare::mod_revision(
                                keys.taken.clone(),
                                CompareOp::Equal,
                                count.revision,
                            ),
                            Compare::mod_revision(
                                held.key.clone(),
                                CompareOp::Equal,
                                mine.mod_revision(),
                            ),
                        ])
                        .and_then([
                            TxnOp::put(
                                keys.taken.clone(),
                                count.taken.saturating_sub(permits_of(&mine)).to_string(),
                                None,
                            ),
                            TxnOp::delete(held.key.clone(), None),
                        ]),
                )
                .await?;
            if resp.succeeded() {
                let _ = self.revoke(held.lease).await;
                return Ok(());
            }
            tokio::time::sleep(backoff.next_delay()).await;
            resp = self.txn(Txn::new().and_then(read.clone())).await?;
        }
        Err(self.contended(&keys))
    }

    async fn permits_held(&self, name: &Name) -> Result<u64> {
        Ok(self.recount(&self.sem_keys(name)).await?.1)
    }

    async fn list_permits(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let root = format!("{}\u{1}semaphores/", self.prefix);
        let from = format!("{root}{}", escape(prefix));
        let resp = self
            .call(|mut c| {
                let from = from.clone();
                async move { c.get(from, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let mut rows = Vec::new();
        for kv in resp.kvs() {
            let Ok(key) = kv.key_str() else { continue };
            // esc(N) + "/h/" + lease: esc() leaves no '/' in the name.
            let Some((escaped, lease)) = key
                .strip_prefix(root.as_str())
                .and_then(|rest| rest.split_once("/h/"))
            else {
                continue;
            };
            let Some(name) = unescape(escaped) else {
                continue;
            };
            rows.push(LockInfo {
                name: holder_row(&name, lease),
                owner: lease.to_string(),
                holder: None,
                fence: u64::try_from(kv.create_revision()).ok(),
                expires_in: None,
                waiters: None,
            });
        }
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows)
    }
}
