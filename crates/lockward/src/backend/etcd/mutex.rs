//! etcd's lock seam, in the layout of `concurrency.Mutex` (the line of
//! contenders is in `queue.rs`).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use etcd_client::{GetOptions, SortOrder, SortTarget};

use super::core::{lease_seconds, EtcdBackend, Place, Wait, CAPABILITIES};
use super::keys;
use crate::backend::{Attempt, Capabilities, Grant, Kind, LockBackend, PermitBackend, Request};
use crate::error::{Error, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

#[async_trait]
impl LockBackend for EtcdBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        self.address.clone()
    }

    fn permits(&self) -> Option<&dyn PermitBackend> {
        Some(self)
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        let entered = self.enter(req).await?;
        if !entered.holds(req.kind) {
            // Go's TryLock: leave the line at once (the drop revokes).
            return Ok(Attempt::Held { expires_in: None });
        }
        let contender = entered.contender;
        let fence = contender.revision as u64;
        let held = contender.keep(req.ttl);
        self.leases().insert((req.name.clone(), req.owner), held);
        Ok(Attempt::Granted { fence })
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        if req.kind == Kind::Reader {
            return self.acquire_read(req, deadline).await;
        }
        let prefix = keys::lock_prefix(&self.prefix, req.name);
        let contender = 'line: loop {
            let entered = self.enter(req).await?;
            let readers_before = entered.readers_before();
            let (mut contender, mut first) =
                (entered.contender, entered.first_writer.unwrap_or_default());
            if first == contender.revision && !readers_before {
                break contender;
            }
            if first == contender.revision {
                // First among the writers, after readers that came earlier.
                contender.keepalive = Some(self.keep_alive_while_waiting(&contender, req.ttl / 3));
                match self
                    .wait_out_readers(req.name, &contender, req.ttl, deadline)
                    .await?
                {
                    Some(true) => break contender,
                    Some(false) => continue 'line,
                    None => return Ok(None),
                }
            }
            contender.keepalive = Some(self.keep_alive_while_waiting(&contender, req.ttl / 3));
            loop {
                match self
                    .wait_for_predecessor(&prefix, contender.revision, deadline)
                    .await?
                {
                    Wait::TimedOut => return Ok(None),
                    // Keys only join a line behind us and leave it: once the
                    // first key is gone, none is left before ours, and ours
                    // still exists while its lease is within its TTL.
                    Wait::Deleted(revision)
                        if revision == first
                            && contender.lease_alive(req.ttl)
                            && !readers_before =>
                    {
                        break 'line contender
                    }
                    Wait::Deleted(_) | Wait::NoneBefore | Wait::Recheck => {}
                }
                let (place, now_first) = self.place(&prefix, contender.revision).await?;
                first = now_first;
                match place {
                    Place::First if !readers_before => break 'line contender,
                    Place::First => {
                        match self
                            .wait_out_readers(req.name, &contender, req.ttl, deadline)
                            .await?
                        {
                            Some(true) => break 'line contender,
                            Some(false) => continue 'line,
                            None => return Ok(None),
                        }
                    }
                    Place::Behind => {}
                    // Our lease lapsed while we waited (keep-alives failed):
                    // join the line again with a new one.
                    Place::Gone => continue 'line,
                }
            }
        };
        Ok(Some(self.take(req, contender)))
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        let Some(held) = self.leases().get(&(name.clone(), owner)).cloned() else {
            return Err(not_owner());
        };
        // A keep-alive renews the lease to the TTL it was granted with; a
        // longer one would give the holder a deadline past the server's.
        if lease_seconds(ttl) > held.ttl_secs {
            return Err(Error::InvalidArgument {
                what: "ttl",
                why: format!(
                    "an etcd lease keeps the TTL it was granted with ({} s); take the lock with the longer TTL instead",
                    held.ttl_secs
                ),
            });
        }
        let alive = self.keep_alive_once(held.lease).await?;
        let key = held.key.clone();
        // Still on our lease: a forced unlock may have moved the key onto
        // a placeholder's (see `forced.rs`).
        let ours = alive
            && self
                .call(|mut c| {
                    let key = key.clone();
                    async move { c.get(key, None).await }
                })
                .await?
                .kvs()
                .first()
                .is_some_and(|kv| kv.lease() == held.lease);
        if ours {
            Ok(())
        } else {
            self.leases().remove(&(name.clone(), owner));
            Err(not_owner())
        }
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let Some(held) = self.leases().remove(&(name.clone(), owner)) else {
            return Err(Error::NotOwner {
                name: name.to_string(),
            });
        };
        if self.revoke(held.lease).await? {
            Ok(())
        } else {
            Err(Error::NotOwner {
                name: name.to_string(),
            })
        }
    }

    /// Revokes the holder's lease (see `forced.rs`).
    async fn force_release(&self, name: &Name, holder: &LockInfo) -> Result<()> {
        self.revoke_holder(name, holder).await
    }

    /// Moves the holder's key onto a placeholder lease (see `forced.rs`).
    async fn force_hold_back(
        &self,
        name: &Name,
        holder: &LockInfo,
        _placeholder: OwnerId,
        label: &str,
    ) -> Result<()> {
        self.move_to_placeholder(name, holder, label).await
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let prefix = keys::lock_prefix(&self.prefix, name);
        let opts = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend);
        let resp = self
            .call(|mut c| {
                let (key, opts) = (prefix.clone(), opts.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let Some(first) = resp.kvs().first() else {
            return Ok(None);
        };
        if self.readers_before(name, first.create_revision()).await? {
            // The first writer still waits for readers: they hold.
            return Ok(None);
        }
        let value = String::from_utf8_lossy(first.value()).into_owned();
        let lease = first.lease();
        // Our own holders are known by lease; others by what they stored.
        let ours = self
            .leases()
            .iter()
            .find(|(_, held)| held.lease == lease)
            .map(|((_, owner), _)| owner.to_string());
        let (owner, label) = match (ours, OwnerId::from_hex(&value)) {
            (Some(owner), None) => (owner, Some(value)),
            (Some(owner), Some(_)) => (owner, None),
            (None, Some(_)) => (value, None),
            (None, None) => (
                format!("lease {lease:x}"),
                Some(value).filter(|v| !v.is_empty()),
            ),
        };
        let ttl = self
            .call(|mut c| async move { c.lease_time_to_live(lease, None).await })
            .await
            .ok()
            .map(|r| r.ttl())
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs);
        Ok(Some(LockInfo {
            name: name.to_string(),
            owner: if owner.is_empty() {
                "(etcdctl)".into()
            } else {
                owner
            },
            label,
            fence: u64::try_from(first.create_revision()).ok(),
            expires_in: ttl,
            waiters: Some(resp.kvs().len() - 1),
            holding: Holding::Lock,
        }))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let range = format!("{}{}", self.prefix, keys::escape(prefix));
        let opts = GetOptions::new().with_prefix().with_keys_only();
        let resp = self
            .call(|mut c| {
                let (key, opts) = (range.clone(), opts.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let found: Vec<String> = resp
            .kvs()
            .iter()
            .filter_map(|kv| std::str::from_utf8(kv.key()).ok())
            .map(str::to_string)
            .collect();
        let names: Vec<Name> = found
            .iter()
            .filter_map(|k| keys::name_of(&self.prefix, k))
            .filter_map(|n| Name::new(n).ok())
            .collect();
        let mut held = crate::backend::inspect_each(self, names).await?;
        held.extend(self.list_readers(&found).await?);
        held.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(held)
    }
}
