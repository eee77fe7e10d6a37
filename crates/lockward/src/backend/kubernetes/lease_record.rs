//! client-go's leader-election record on a Lease: how a holder's identity
//! carries lockward's owner id, how a Lease is taken, renewed and released,
//! and when a holder counts as expired (its record unchanged for its
//! `leaseDurationSeconds` on this process's clock).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

use crate::owner::OwnerId;

/// The annotation holding the fence of the holder named in
/// [`FENCE_HOLDER`]: written in the same update that takes the Lease.
pub(super) const FENCE: &str = "lockward.dev/fence";
/// Whose fence [`FENCE`] is: a later holder that keeps annotations
/// (client-go does) is not shown with it.
pub(super) const FENCE_HOLDER: &str = "lockward.dev/fence-holder";

/// The `holderIdentity` lockward writes: `LABEL_OWNER` (client-go's own
/// identities are `HOST_UUID`), or the owner id alone without a label.
pub(super) fn identity(owner: OwnerId, label: Option<&str>) -> String {
    match label.filter(|l| !l.is_empty()) {
        Some(label) => format!("{label}_{owner}"),
        None => owner.to_string(),
    }
}

/// The owner id at the end of a lockward identity; `None` for other
/// programs' identities.
pub(super) fn owner_of(identity: &str) -> Option<OwnerId> {
    let at = identity.len().checked_sub(32)?;
    let hex = identity.get(at..)?;
    let owner = OwnerId::from_hex(hex)?;
    (at == 0 || identity[..at].ends_with('_')).then_some(owner)
}

/// A holder's identity as `inspect` shows its owner: the owner id of a
/// lockward identity, another program's identity whole.
pub(super) fn shown(identity: &str) -> String {
    owner_of(identity).map_or_else(|| identity.to_string(), |o| o.to_string())
}

/// The label part of a lockward identity, or the whole identity of
/// another program.
pub(super) fn label_of(identity: &str) -> Option<String> {
    match owner_of(identity) {
        Some(_) if identity.len() == 32 => None,
        Some(_) => Some(identity[..identity.len() - 33].to_string()),
        None => Some(identity.to_string()),
    }
}

/// The fields client-go compares to tell whether a Lease changed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Record {
    pub(super) holder: String,
    pub(super) duration: i32,
    acquired: Option<MicroTime>,
    renewed: Option<MicroTime>,
    transitions: i32,
}

impl Record {
    pub(super) fn of(spec: Option<&LeaseSpec>) -> Record {
        let spec = spec.cloned().unwrap_or_default();
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            duration: spec.lease_duration_seconds.unwrap_or(0),
            acquired: spec.acquire_time,
            renewed: spec.renew_time,
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// Nobody holds it: never taken, or released.
    pub(super) fn is_free(&self) -> bool {
        self.holder.is_empty()
    }
}

/// A Lease's duration for a TTL: whole seconds, rounded up, at least 1 (the
/// server field counts seconds; never shorter than asked).
pub(super) fn duration_seconds(ttl: Duration) -> i32 {
    let secs = ttl
        .as_secs()
        .saturating_add(u64::from(ttl.subsec_nanos() > 0));
    secs.clamp(1, i32::MAX as u64) as i32
}

/// Now, as the record's times are written.
pub(super) fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// The spec after `identity` takes the Lease whose spec was `old` (`None`:
/// it is created): a new holder starts a new `acquireTime` and, on an
/// existing Lease, one more `leaseTransitions`, as client-go counts them.
pub(super) fn taken(old: Option<&LeaseSpec>, identity: &str, ttl: Duration) -> LeaseSpec {
    let now = now();
    let mut spec = old.cloned().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(identity) {
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(match old {
            Some(old) => old.lease_transitions.unwrap_or(0).saturating_add(1),
            None => 0,
        });
    }
    spec.holder_identity = Some(identity.to_string());
    spec.lease_duration_seconds = Some(duration_seconds(ttl));
    spec.renew_time = Some(now);
    spec
}

/// The spec after its holder renews it for `ttl`.
pub(super) fn renewed(old: &LeaseSpec, ttl: Duration) -> LeaseSpec {
    let mut spec = old.clone();
    spec.lease_duration_seconds = Some(duration_seconds(ttl));
    spec.renew_time = Some(now());
    spec
}

/// The spec after its holder releases it, as client-go releases: no
/// holder, a duration of 1 s, both times now, the transitions kept.
pub(super) fn released(old: &LeaseSpec) -> LeaseSpec {
    let now = now();
    LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        ..old.clone()
    }
}

/// `meta` with the fence annotations of a new holder.
pub(super) fn with_fence(mut meta: ObjectMeta, fence: u64, identity: &str) -> ObjectMeta {
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(FENCE.to_string(), fence.to_string());
    annotations.insert(FENCE_HOLDER.to_string(), identity.to_string());
    meta
}

/// The fence of the Lease's current holder, when lockward took it.
pub(super) fn fence_of(meta: &ObjectMeta, holder: &str) -> Option<u64> {
    let annotations = meta.annotations.as_ref()?;
    if annotations.get(FENCE_HOLDER).map(String::as_str) != Some(holder) {
        return None;
    }
    annotations.get(FENCE)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities() {
        let owner = OwnerId::random();
        let labelled = identity(owner, Some("web-1:42"));
        assert_eq!(owner_of(&labelled), Some(owner));
        assert_eq!(label_of(&labelled).as_deref(), Some("web-1:42"));
        let bare = identity(owner, None);
        assert_eq!(owner_of(&bare), Some(owner));
        assert_eq!(label_of(&bare), None);
        // client-go's HOST_UUID identities are not lockward owners.
        let go = "node-a_1b4e28ba-2fa1-11d2-883f-0016d3cca427";
        assert_eq!(owner_of(go), None);
        assert_eq!(label_of(go).as_deref(), Some(go));
        assert_eq!(owner_of(&format!("x{owner}")), None);
    }

    #[test]
    fn durations_round_up() {
        assert_eq!(duration_seconds(Duration::from_millis(1)), 1);
        assert_eq!(duration_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(duration_seconds(Duration::from_secs(15)), 15);
        assert_eq!(duration_seconds(Duration::MAX), i32::MAX);
    }

    #[test]
    fn transitions_count_new_holders() {
        let created = taken(None, "a", Duration::from_secs(5));
        assert_eq!(created.lease_transitions, Some(0));
        let renewed = taken(Some(&created), "a", Duration::from_secs(5));
        assert_eq!(renewed.lease_transitions, Some(0));
        assert_eq!(renewed.acquire_time, created.acquire_time);
        let freed = released(&renewed);
        assert_eq!(freed.holder_identity.as_deref(), Some(""));
        assert_eq!(freed.lease_duration_seconds, Some(1));
        let next = taken(Some(&freed), "b", Duration::from_secs(5));
        assert_eq!(next.lease_transitions, Some(1));
    }
}
