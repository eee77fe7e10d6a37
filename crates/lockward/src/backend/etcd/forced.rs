//! A forced unlock on etcd: the holder's key, found by its create revision
//! (the fence), goes with its lease; or, for a holder with a lock-delay,
//! moves onto a placeholder lease that nobody keeps alive, so that the name
//! stays taken until then while the holder's keep-alives no longer count.

use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget};
use etcd_client::{Txn, TxnOp};

use super::core::EtcdBackend;
use super::keys;
use crate::error::{Error, Result};
use crate::lease::LockInfo;
use crate::name::Name;

fn not_owner(name: &Name) -> Error {
    Error::NotOwner {
        name: name.to_string(),
    }
}

impl EtcdBackend {
    /// The first key in `name`'s line, when it is `holder`'s (the same
    /// create revision, so a key created since is never taken for it).
    async fn holder_key(&self, name: &Name, holder: &LockInfo) -> Result<KeyValue> {
        let prefix = keys::lock_prefix(&self.prefix, name);
        let opts = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1);
        let resp = self
            .call(|mut c| {
                let (key, opts) = (prefix.clone(), opts.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        match resp.kvs().first() {
            Some(first) if u64::try_from(first.create_revision()).ok() == holder.fence => {
                Ok(first.clone())
            }
            _ => Err(not_owner(name)),
        }
    }

    /// Revokes the holder's lease: the key goes with it (and the holder's
    /// session, when it is an etcdctl one). The holder learns at its next
    /// keep-alive.
    pub(super) async fn revoke_holder(&self, name: &Name, holder: &LockInfo) -> Result<()> {
        let first = self.holder_key(name, holder).await?;
        if self.revoke(first.lease()).await? {
            Ok(())
        } else {
            Err(not_owner(name))
        }
    }

    /// Moves the holder's key onto a new lease of the time its own had
    /// left (rounded up); the key keeps its create revision, so it stays
    /// first in line and the waiters behind it wait for its deletion as
    /// before. The holder's renewal checks that its key is still on its
    /// lease, so it learns at its next one.
    pub(super) async fn move_to_placeholder(
        &self,
        name: &Name,
        holder: &LockInfo,
        label: &str,
    ) -> Result<()> {
        let first = self.holder_key(name, holder).await?;
        let lease = first.lease();
        let left = self
            .call(|mut c| async move { c.lease_time_to_live(lease, None).await })
            .await?
            .ttl();
        if left <= 0 {
            return Err(not_owner(name));
        }
        // etcd reports the whole seconds left, rounded down: one more, so
        // that the placeholder never ends before the holder's lease would.
        let placeholder = self.grant(Duration::from_secs(left as u64 + 1)).await?;
        let key = first.key().to_vec();
        let txn = Txn::new()
            .when([
                Compare::create_revision(key.clone(), CompareOp::Equal, first.create_revision()),
                Compare::lease(key.clone(), CompareOp::Equal, lease),
            ])
            .and_then([TxnOp::put(
                key,
                label,
                Some(PutOptions::new().with_lease(placeholder)),
            )]);
        let moved = self
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?
            .succeeded();
        if moved {
            Ok(())
        } else {
            self.revoke(placeholder).await?;
            Err(not_owner(name))
        }
    }
}
