//! Semaphores kept by etcd: a key per holder on the holder's own lease,
//! and the count of taken permits split over up to 16 shard keys, each
//! with a quota, changed together with the holder's key by one
//! transaction, so a permit costs the same however many hold one, and
//! concurrent takes rarely write the same key.
//!
//! For a semaphore `N` under prefix `P` (U+0001 keeps these keys apart
//! from every lock's, as records are), with `B` = `P` + U+0001 +
//! `semaphores/` + esc(N):
//!
//! | key | holds |
//! | --- | --- |
//! | `B/s/` + shard | `TAKEN QUOTA`: permits its holders took, and its quota |
//! | `B/h/` + lease id (hex) | a holder, on its lease: `PERMITS SHARD OWNER` |
//!
//! Every shard keeps `taken <= quota` and the quotas add up to the permits,
//! so the shards together never hold more.
//!
//! - **Take**: grant a lease; read the holder's shard (a random one); if
//!   the permits fit its quota, one transaction writes it plus `k` and puts
//!   the holder's key, on the revision read. The fence is the holder key's
//!   create revision (revisions only grow).
//! - **When they do not fit the shard's quota**, the shards and holders are
//!   read at one revision; the free permits (by the live holders: a holder
//!   whose lease ran out took its key with it) are shared out again as
//!   quotas and the holder added, in one transaction on the revisions of
//!   every shard, or refused when they do not fit at all. That reads every
//!   holder, once per quota's worth of takes on a shard.
//! - **Give back**: one transaction deletes the key and lowers its shard
//!   (on the revisions read), then the lease is revoked. **Renewal** is a
//!   keep-alive of the lease, as for a lock.
//! - A write that loses to another is tried again after a random pause:
//!   every losing write still costs the cluster a round of consensus.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Compare, CompareOp, GetOptions, KeyValue, PutOptions, Txn, TxnOp, TxnOpResponse,
};

use super::core::{lease_seconds, EtcdBackend, Held};
use super::keys::{escape, unescape};
use crate::backend::{no_permits, permit_row, LockBackend, PermitBackend, Request};
use crate::error::{Error, Result};
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

/// How many writes may lose to conflicting ones before the caller is told
/// the semaphore is contended.
const WRITE_TRIES: u32 = 1_000;

/// How many keys a semaphore's count is split over (fewer when it has
/// fewer permits).
const SHARDS: u32 = 16;

/// The pause after a write that lost: anywhere up to a cap that doubles
/// with each loss (200 µs to 8 ms), which spreads the writers out.
struct ConflictBackoff(Duration);

fn conflict_backoff() -> ConflictBackoff {
    ConflictBackoff(Duration::from_micros(200))
}

impl ConflictBackoff {
    async fn pause(&mut self) {
        let cap = self.0;
        self.0 = (cap * 2).min(Duration::from_millis(8));
        tokio::time::sleep(cap.mul_f64(fastrand::f64())).await;
    }
}

/// The keys of one semaphore.
struct SemKeys {
    shards: String,
    holders: String,
}

impl SemKeys {
    fn shard(&self, index: u32) -> String {
        format!("{}{index}", self.shards)
    }

    fn holder(&self, lease: i64) -> String {
        format!("{}{lease:x}", self.holders)
    }
}

/// A shard as read: permits taken, quota, and the revision a write must
/// name (0: it does not exist yet).
#[derive(Clone, Copy, Default)]
struct Shard {
    taken: u64,
    quota: u64,
    revision: i64,
}

impl Shard {
    fn of(kv: Option<&KeyValue>) -> Shard {
        let Some(kv) = kv else {
            return Shard::default();
        };
        let (taken, quota) = pair(kv);
        Shard {
            taken,
            quota,
            revision: kv.mod_revision(),
        }
    }

    fn value(taken: u64, quota: u64) -> String {
        format!("{taken} {quota}")
    }
}

/// The first two numbers of a value (`TAKEN QUOTA`, `PERMITS SHARD …`); zeros where it
/// is not (nothing lockward wrote counts for anything).
fn pair(kv: &KeyValue) -> (u64, u64) {
    let text = kv.value_str().unwrap_or("");
    let mut numbers = text.split(' ').map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

fn first_kv(response: Option<&TxnOpResponse>) -> Option<&KeyValue> {
    match response {
        Some(TxnOpResponse::Get(g)) => g.kvs().first(),
        _ => None,
    }
}

fn all_kvs(response: Option<&TxnOpResponse>) -> &[KeyValue] {
    match response {
        Some(TxnOpResponse::Get(g)) => g.kvs(),
        _ => &[],
    }
}

/// What sharing the permits out again came to.
enum Shared {
    /// Taken, with this fence.
    Taken(i64),
    /// They do not fit: this many are free.
    Short(u64),
    /// Another write came first.
    Lost,
}

impl EtcdBackend {
    fn sem_keys(&self, name: &Name) -> SemKeys {
        let base = format!("{}\u{1}semaphores/{}", self.prefix, escape(name.as_str()));
        SemKeys {
            shards: format!("{base}/s/"),
            holders: format!("{base}/h/"),
        }
    }

    /// Deletes holder `key` of semaphore `name` and takes its permits off
    /// its shard in one transaction, then revokes its `lease`.
    async fn give_back(&self, name: &Name, key: &str, lease: i64) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let keys = self.sem_keys(name);
        let mut backoff = conflict_backoff();
        for _ in 0..WRITE_TRIES {
            let read = self
                .txn(Txn::new().and_then([
                    TxnOp::get(key, None),
                    TxnOp::get(keys.shards.clone(), Some(GetOptions::new().with_prefix())),
                ]))
                .await?;
            let Some(mine) = first_kv(read.op_responses().first()).cloned() else {
                // Its lease ran out: the key went with it (its shard is set
                // right when the permits are next shared out).
                return Err(not_owner());
            };
            let (permits, index) = pair(&mine);
            let shard_key = keys.shard(u32::try_from(index).unwrap_or(0));
            let shard = Shard::of(
                all_kvs(read.op_responses().get(1))
                    .iter()
                    .find(|kv| kv.key() == shard_key.as_bytes()),
            );
            let resp = self
                .txn(
                    Txn::new()
                        .when([
                            Compare::mod_revision(
                                shard_key.clone(),
                                CompareOp::Equal,
                                shard.revision,
                            ),
                            Compare::mod_revision(key, CompareOp::Equal, mine.mod_revision()),
                        ])
                        .and_then([
                            TxnOp::put(
                                shard_key,
                                Shard::value(shard.taken.saturating_sub(permits), shard.quota),
                                None,
                            ),
                            TxnOp::delete(key, None),
                        ]),
                )
                .await?;
            if resp.succeeded() {
                let _ = self.revoke(lease).await;
                return Ok(());
            }
            backoff.pause().await;
        }
        Err(self.contended(&keys))
    }

    async fn txn(&self, txn: Txn) -> Result<etcd_client::TxnResponse> {
        self.call(|mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await
    }

    async fn get_kv(&self, key: &str) -> Result<Option<KeyValue>> {
        let key = key.to_string();
        let resp = self
            .call(|mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(resp.kvs().first().cloned())
    }

    /// Every shard and the live holders' permits per shard, at one revision.
    async fn read_all(&self, keys: &SemKeys) -> Result<(BTreeMap<u32, Shard>, BTreeMap<u32, u64>)> {
        let prefix = || Some(GetOptions::new().with_prefix());
        let resp = self
            .txn(Txn::new().and_then([
                TxnOp::get(keys.shards.clone(), prefix()),
                TxnOp::get(keys.holders.clone(), prefix()),
            ]))
            .await?;
        let mut shards = BTreeMap::new();
        for kv in all_kvs(resp.op_responses().first()) {
            let index = kv
                .key_str()
                .ok()
                .and_then(|k| k.strip_prefix(keys.shards.as_str()))
                .and_then(|i| i.parse::<u32>().ok());
            if let Some(index) = index.filter(|i| *i < SHARDS) {
                shards.insert(index, Shard::of(Some(kv)));
            }
        }
        let mut live = BTreeMap::new();
        for kv in all_kvs(resp.op_responses().get(1)) {
            let (permits, shard) = pair(kv);
            *live.entry(u32::try_from(shard).unwrap_or(0)).or_insert(0) += permits;
        }
        Ok((shards, live))
    }

    /// Counts the live holders, and shares the free permits out as quotas
    /// with `take` more on shard `mine`, for the holder whose key `holder`
    /// `put` writes.
    async fn share_out(
        &self,
        keys: &SemKeys,
        (of, take, mine): (u32, u32, u32),
        holder: &str,
        put: TxnOp,
    ) -> Result<Shared> {
        let (shards, live) = self.read_all(keys).await?;
        let used: u64 = live.values().sum();
        let (of, take) = (u64::from(of), u64::from(take));
        if used + take > of {
            return Ok(Shared::Short(of - used.min(of)));
        }
        // Every shard that exists is shared out, also ones a caller with
        // more permits made, so that the quotas never add up to more.
        let count = shards
            .keys()
            .next_back()
            .map_or(0, |i| i + 1)
            .max(of.min(u64::from(SHARDS)) as u32)
            .max(mine + 1);
        let spare = of - used - take;
        let mut when = Vec::new();
        let mut then = Vec::new();
        for index in 0..count {
            let key = keys.shard(index);
            let read = shards.get(&index).copied().unwrap_or_default();
            when.push(Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                read.revision,
            ));
            let taken =
                live.get(&index).copied().unwrap_or(0) + if index == mine { take } else { 0 };
            let quota = taken
                + spare / u64::from(count)
                + u64::from(u64::from(index) < spare % u64::from(count));
            then.push(TxnOp::put(key, Shard::value(taken, quota), None));
        }
        then.push(put);
        let resp = self
            .txn(
                Txn::new()
                    .when(when)
                    .and_then(then)
                    .or_else([TxnOp::get(holder.to_string(), None)]),
            )
            .await?;
        if resp.succeeded() {
            return Ok(Shared::Taken(resp.header().map_or(0, |h| h.revision())));
        }
        // A retried call whose first run applied finds its own key.
        Ok(match first_kv(resp.op_responses().first()) {
            Some(kv) => Shared::Taken(kv.create_revision()),
            None => Shared::Lost,
        })
    }

    fn contended(&self, keys: &SemKeys) -> Error {
        Error::Contended {
            key: keys.shards.clone(),
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
        let mine = fastrand::u32(0..of.min(SHARDS));
        let shard_key = keys.shard(mine);
        // The owner too, for `status`.
        let put_holder = TxnOp::put(
            holder.clone(),
            format!("{take} {mine} {}", req.owner),
            Some(PutOptions::new().with_lease(lease)),
        );
        let mut shard = Shard::of(self.get_kv(&shard_key).await?.as_ref());
        let mut backoff = conflict_backoff();
        for _ in 0..WRITE_TRIES {
            let fence = if shard.revision > 0 && shard.taken + u64::from(take) <= shard.quota {
                let resp = self
                    .txn(
                        Txn::new()
                            .when([Compare::mod_revision(
                                shard_key.clone(),
                                CompareOp::Equal,
                                shard.revision,
                            )])
                            .and_then([
                                TxnOp::put(
                                    shard_key.clone(),
                                    Shard::value(shard.taken + u64::from(take), shard.quota),
                                    None,
                                ),
                                put_holder.clone(),
                            ])
                            .or_else([TxnOp::get(holder.clone(), None)]),
                    )
                    .await?;
                if resp.succeeded() {
                    resp.header().map(|h| h.revision())
                } else {
                    // A retried call whose first run applied finds its own key.
                    first_kv(resp.op_responses().first()).map(|kv| kv.create_revision())
                }
            } else {
                match self
                    .share_out(&keys, (of, take, mine), &holder, put_holder.clone())
                    .await?
                {
                    Shared::Taken(fence) => Some(fence),
                    Shared::Short(free) => {
                        let _ = self.revoke(lease).await;
                        return Err(no_permits(req.name.as_str(), take, free, of));
                    }
                    Shared::Lost => None,
                }
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
            // Lost to another write: pause, then read the shard afresh.
            backoff.pause().await;
            shard = Shard::of(self.get_kv(&shard_key).await?.as_ref());
        }
        let _ = self.revoke(lease).await;
        Err(self.contended(&keys))
    }

    async fn extend_permits(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        // The holder's lease and key are kept as a lock's are.
        LockBackend::extend(self, name, owner, ttl).await
    }

    async fn release_permits(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let Some(held) = self.leases().remove(&(name.clone(), owner)) else {
            return Err(Error::NotOwner {
                name: name.to_string(),
            });
        };
        self.give_back(name, &held.key, held.lease).await
    }

    /// Finds the holder's key by its row (`…#permit/LEASE`, its create
    /// revision the fence) and gives its permits back, revoking its lease.
    async fn force_release_permits(&self, name: &Name, holder: &LockInfo) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: holder.name.clone(),
        };
        let lease = crate::backend::split_holder_row(&holder.name)
            .and_then(|(_, id)| i64::from_str_radix(id, 16).ok())
            .ok_or_else(not_owner)?;
        let key = self.sem_keys(name).holder(lease);
        match self.get_kv(&key).await? {
            Some(kv) if u64::try_from(kv.create_revision()).ok() == holder.fence => {}
            _ => return Err(not_owner()),
        }
        self.give_back(name, &key, lease).await
    }

    async fn permits_held(&self, name: &Name) -> Result<u64> {
        Ok(self.read_all(&self.sem_keys(name)).await?.1.values().sum())
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
            let fence = u64::try_from(kv.create_revision()).ok();
            rows.push(permit_row(&name, lease, lease.to_string(), fence));
        }
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows)
    }
}
