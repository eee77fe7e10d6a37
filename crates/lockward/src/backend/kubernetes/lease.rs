//! Locks as Leases, by client-go's rules: a free or expired Lease is taken
//! with an update on the `resourceVersion` read (a conflict means another
//! candidate won), renewed by its holder, and released by clearing the
//! holder with a duration of 1 s.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ListParams, PostParams};

use super::lease_record::{self, Record};
use super::watch::LeaseWatch;
use super::{names, KubernetesBackend};
use crate::backend::{Attempt, Capabilities, LockBackend, Request, Subscription};
use crate::error::{Error, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// How often an extend or release reads again after a conflicting write
/// that left us the holder (someone edited the Lease's metadata).
const CONFLICT_TRIES: usize = 5;

#[async_trait]
impl LockBackend for KubernetesBackend {
    fn capabilities(&self) -> Capabilities {
        super::core::CAPABILITIES
    }

    fn address(&self) -> String {
        self.address.clone()
    }

    /// One read and, when the Lease is free or its holder expired, one
    /// conditional write. The fence is the `resourceVersion` the write was
    /// conditioned on (a fresh Lease: the namespace's list revision), which
    /// is written beside the holder in the same update.
    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        let object = self.lease_name(req.name)?;
        let identity = lease_record::identity(req.owner, req.label);
        let Some(lease) = self
            .leases
            .get_opt(&object)
            .await
            .map_err(|e| self.fail(e))?
        else {
            return self.create(&object, &identity, req.ttl).await;
        };
        let record = Record::of(lease.spec.as_ref());
        if !record.is_free() && record.holder != identity {
            let left = self.observed.time_left(&object, &record);
            if !left.is_zero() {
                return Ok(Attempt::Held {
                    expires_in: Some(left),
                });
            }
        }
        let fence = self.version_of(&lease.metadata.resource_version)?;
        let taken = Lease {
            metadata: lease_record::with_fence(lease.metadata.clone(), fence, &identity),
            spec: Some(lease_record::taken(lease.spec.as_ref(), &identity, req.ttl)),
        };
        match self
            .leases
            .replace(&object, &PostParams::default(), &taken)
            .await
        {
            Ok(_) => {
                self.observed.forget(&object);
                Ok(Attempt::Granted { fence })
            }
            // Another candidate wrote first, or the Lease was deleted: the
            // watch wakes us for what comes next.
            Err(kube::Error::Api(s)) if s.is_conflict() || s.is_not_found() => {
                Ok(Attempt::Held { expires_in: None })
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// A watch on the one Lease (see `LeaseWatch`).
    async fn subscribe(&self, name: &Name) -> Result<Subscription> {
        let object = self.lease_name(name)?;
        let watch = LeaseWatch::open(
            self.leases.clone(),
            object,
            self.observed.clone(),
            self.address.clone(),
        )
        .await?;
        Ok(Subscription::pushed(watch))
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        self.update_own(name, owner, |spec| lease_record::renewed(spec, ttl))
            .await
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        self.update_own(name, owner, lease_record::released).await?;
        self.observed.forget(&self.lease_name(name)?);
        Ok(())
    }

    /// Releases the Lease as client-go does, for a holder known by what
    /// `inspect` shows as its owner: a lockward holder or any other program
    /// (a client-go elector included, which stops leading when its next
    /// renewal finds another holder).
    async fn force_release(&self, name: &Name, holder: &LockInfo) -> Result<()> {
        self.update_held(
            name,
            |id| lease_record::shown(id) == holder.owner,
            lease_record::released,
        )
        .await?;
        self.observed.forget(&self.lease_name(name)?);
        Ok(())
    }

    /// The Lease passes to the placeholder for the time its holder had
    /// left as this process saw it; every observer counts that duration
    /// from when it sees the change, so none frees it earlier.
    async fn force_hold_back(
        &self,
        name: &Name,
        holder: &LockInfo,
        placeholder: OwnerId,
        label: &str,
    ) -> Result<()> {
        let identity = lease_record::identity(placeholder, Some(label));
        let left = holder.expires_in.unwrap_or_default();
        self.update_held(
            name,
            |id| lease_record::shown(id) == holder.owner,
            |spec| lease_record::taken(Some(spec), &identity, left),
        )
        .await?;
        self.observed.forget(&self.lease_name(name)?);
        Ok(())
    }

    /// The holder as this process sees it: a Lease whose record has not
    /// changed for its duration since this process first read it is free.
    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let object = self.lease_name(name)?;
        let lease = self
            .leases
            .get_opt(&object)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(lease.and_then(|lease| self.info(name.as_str(), &object, &lease)))
    }

    /// Lists the namespace's Leases whose names lockward wrote (or, with an
    /// empty prefix, every Lease) and keeps the held ones.
    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let all = self
            .leases
            .list(&ListParams::default())
            .await
            .map_err(|e| self.fail(e))?;
        let mut held: Vec<LockInfo> = all
            .items
            .iter()
            .filter_map(|lease| {
                let object = lease.metadata.name.as_deref()?;
                let name = names::name_of(&self.prefix, object)?;
                if !name.starts_with(prefix) {
                    return None;
                }
                self.info(&name, object, lease)
            })
            .collect();
        held.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(held)
    }
}

impl KubernetesBackend {
    /// The Lease name of a lock name.
    pub(super) fn lease_name(&self, name: &Name) -> Result<String> {
        names::object_name(&self.prefix, name.as_str())
    }

    /// Creates the Lease with us as its holder. Its fence is the revision
    /// of a list of the namespace's Leases, read first: larger than every
    /// write before it, so also than the fences of a Lease someone deleted.
    async fn create(&self, object: &str, identity: &str, ttl: Duration) -> Result<Attempt> {
        let params = ListParams::default()
            .fields(&format!("metadata.name={object}"))
            .limit(1);
        let list = self.leases.list(&params).await.map_err(|e| self.fail(e))?;
        let fence = self.version_of(&list.metadata.resource_version)?;
        let lease = Lease {
            metadata: lease_record::with_fence(
                kube::api::ObjectMeta {
                    name: Some(object.to_string()),
                    namespace: Some(self.namespace.clone()),
                    ..Default::default()
                },
                fence,
                identity,
            ),
            spec: Some(lease_record::taken(None, identity, ttl)),
        };
        match self.leases.create(&PostParams::default(), &lease).await {
            Ok(_) => {
                self.observed.forget(object);
                Ok(Attempt::Granted { fence })
            }
            Err(kube::Error::Api(s)) if s.is_already_exists() || s.is_conflict() => {
                Ok(Attempt::Held { expires_in: None })
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Reads the Lease and, while `owner` holds it, writes `change` of its
    /// spec on the version read; [`Error::NotOwner`] once it does not.
    async fn update_own(
        &self,
        name: &Name,
        owner: OwnerId,
        change: impl Fn(
                &k8s_openapi::api::coordination::v1::LeaseSpec,
            ) -> k8s_openapi::api::coordination::v1::LeaseSpec
            + Send
            + Sync,
    ) -> Result<()> {
        self.update_held(
            name,
            |identity| lease_record::owner_of(identity) == Some(owner),
            change,
        )
        .await
    }

    /// Changes the Lease of `name` while its holder is one `holds` accepts
    /// (updates on the `resourceVersion` read, again after a conflict);
    /// [`Error::NotOwner`] otherwise.
    async fn update_held(
        &self,
        name: &Name,
        holds: impl Fn(&str) -> bool + Send + Sync,
        change: impl Fn(
                &k8s_openapi::api::coordination::v1::LeaseSpec,
            ) -> k8s_openapi::api::coordination::v1::LeaseSpec
            + Send
            + Sync,
    ) -> Result<()> {
        let object = self.lease_name(name)?;
        let not_owner = || Error::NotOwner {
            name: name.to_string(),
        };
        for _ in 0..CONFLICT_TRIES {
            let lease = self
                .leases
                .get_opt(&object)
                .await
                .map_err(|e| self.fail(e))?
                .ok_or_else(not_owner)?;
            let spec = lease.spec.clone().unwrap_or_default();
            let holder = spec.holder_identity.as_deref().unwrap_or("");
            if holder.is_empty() || !holds(holder) {
                return Err(not_owner());
            }
            let updated = Lease {
                metadata: lease.metadata,
                spec: Some(change(&spec)),
            };
            match self
                .leases
                .replace(&object, &PostParams::default(), &updated)
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.is_conflict() => continue,
                Err(kube::Error::Api(s)) if s.is_not_found() => return Err(not_owner()),
                Err(e) => return Err(self.fail(e)),
            }
        }
        Err(Error::Contended {
            key: name.to_string(),
            tries: CONFLICT_TRIES as u32,
        })
    }

    /// What `inspect` shows of a Lease: `None` when free or expired.
    fn info(&self, name: &str, object: &str, lease: &Lease) -> Option<LockInfo> {
        let record = Record::of(lease.spec.as_ref());
        if record.is_free() {
            return None;
        }
        let left = self.observed.time_left(object, &record);
        if left.is_zero() {
            return None;
        }
        Some(LockInfo {
            name: name.to_string(),
            owner: lease_record::shown(&record.holder),
            label: lease_record::label_of(&record.holder),
            fence: lease_record::fence_of(&lease.metadata, &record.holder),
            expires_in: Some(left),
            waiters: None,
            holding: Holding::Lock,
        })
    }

    /// A `resourceVersion` as a number: etcd's revision, global and only
    /// growing, which Kubernetes lets clients compare.
    pub(super) fn version_of(&self, version: &Option<String>) -> Result<u64> {
        version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .ok_or_else(|| Error::Protocol {
                address: self.address.clone(),
                message: format!(
                    "resourceVersion {version:?} is not a positive number; lockward's fences need an API server that stores its objects in etcd"
                ),
                cause: None,
            })
    }
}
