//! Records as ConfigMaps, one per record (`PREFIXr-KEY` for plain records,
//! `PREFIXv-KEY` for versioned ones), with the value under `value` and the
//! expiry, in milliseconds since the epoch, in an annotation. Conditional
//! writes are updates on the `resourceVersion` read, which is also a
//! versioned record's version.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};

use super::{names, KubernetesBackend};
use crate::backend::{RecordBackend, Versioned};
use crate::error::Result;
use crate::name::Name;

/// The annotation with a record's expiry (absent: kept forever).
const EXPIRES: &str = "lockward.dev/expires-at-ms";
/// The label that tells plain records from versioned ones, for listing.
const KIND: &str = "lockward.dev/record";

/// Which of the two record spaces.
#[derive(Clone, Copy)]
enum Space {
    Plain,
    Versioned,
}

impl Space {
    fn tag(self) -> &'static str {
        match self {
            Space::Plain => "r-",
            Space::Versioned => "v-",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Space::Plain => "plain",
            Space::Versioned => "versioned",
        }
    }
}

#[async_trait]
impl RecordBackend for KubernetesBackend {
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool> {
        Ok(self
            .write_if_absent(Space::Plain, key, value, Some(ttl))
            .await?
            .is_some())
    }

    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()> {
        self.put(key, value, Some(ttl)).await
    }

    async fn put_permanent_record(&self, key: &Name, value: &str) -> Result<()> {
        self.put(key, value, None).await
    }

    async fn record(&self, key: &Name) -> Result<Option<String>> {
        Ok(self
            .read_live(Space::Plain, key)
            .await?
            .map(|map| value_of(&map)))
    }

    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let params = ListParams::default().labels(&format!("{KIND}={}", Space::Plain.label()));
        let all = self
            .config_maps
            .list(&params)
            .await
            .map_err(|e| self.fail(e))?;
        let head = self.space_prefix(Space::Plain);
        let now = now_ms();
        let mut out: Vec<(String, String)> = all
            .items
            .iter()
            .filter(|map| is_live(map, now))
            .filter_map(|map| {
                let key = names::name_of(&head, map.metadata.name.as_deref()?)?;
                key.starts_with(prefix).then(|| (key, value_of(map)))
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// The version is the ConfigMap's `resourceVersion`: etcd's revision,
    /// so it only grows, also across expiry and deletion.
    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>> {
        let Some(map) = self.read_live(Space::Versioned, key).await? else {
            return Ok(None);
        };
        Ok(Some(Versioned {
            value: value_of(&map),
            version: self.version_of(&map.metadata.resource_version)?,
        }))
    }

    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        if expected == 0 {
            return self
                .write_if_absent(Space::Versioned, key, value, Some(ttl))
                .await;
        }
        // One conditional update on the version read: it fails when anyone
        // wrote (or deleted) the record since.
        let object = self.object(Space::Versioned, key)?;
        let meta = ObjectMeta {
            resource_version: Some(expected.to_string()),
            ..ObjectMeta::default()
        };
        self.replace(Space::Versioned, &object, meta, value, Some(ttl))
            .await
    }
}

impl KubernetesBackend {
    /// The object-name prefix of one record space.
    fn space_prefix(&self, space: Space) -> String {
        format!("{}{}", self.prefix, space.tag())
    }

    fn object(&self, space: Space, key: &Name) -> Result<String> {
        names::object_name(&self.space_prefix(space), key.as_str())
    }

    /// The record if it exists and has not expired. An expired one is
    /// deleted on the way (on its version, so a newer write is kept).
    async fn read_live(&self, space: Space, key: &Name) -> Result<Option<ConfigMap>> {
        let object = self.object(space, key)?;
        let Some(map) = self
            .config_maps
            .get_opt(&object)
            .await
            .map_err(|e| self.fail(e))?
        else {
            return Ok(None);
        };
        if is_live(&map, now_ms()) {
            return Ok(Some(map));
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: map.metadata.resource_version.clone(),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        // Best effort: another reader may have deleted or rewritten it.
        let _ = self.config_maps.delete(&object, &params).await;
        Ok(None)
    }

    /// Creates the record unless a live one exists; an expired one is
    /// replaced on its version. The new version, or `None` when a live
    /// record (or a concurrent writer) was there first.
    async fn write_if_absent(
        &self,
        space: Space,
        key: &Name,
        value: &str,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>> {
        let object = self.object(space, key)?;
        let fresh = self.config_map(space, ObjectMeta::default(), &object, value, ttl);
        match self
            .config_maps
            .create(&PostParams::default(), &fresh)
            .await
        {
            Ok(made) => return Ok(Some(self.version_of(&made.metadata.resource_version)?)),
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => return Err(self.fail(e)),
        }
        match self
            .config_maps
            .get_opt(&object)
            .await
            .map_err(|e| self.fail(e))?
        {
            Some(map) if !is_live(&map, now_ms()) => {
                self.replace(space, &object, map.metadata, value, ttl).await
            }
            _ => Ok(None),
        }
    }

    /// Replaces the ConfigMap whose metadata (and version) is `meta`;
    /// `None` when it changed or went away meanwhile.
    async fn replace(
        &self,
        space: Space,
        object: &str,
        meta: ObjectMeta,
        value: &str,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>> {
        let map = self.config_map(space, meta, object, value, ttl);
        match self
            .config_maps
            .replace(object, &PostParams::default(), &map)
            .await
        {
            Ok(done) => Ok(Some(self.version_of(&done.metadata.resource_version)?)),
            Err(kube::Error::Api(s)) if s.is_conflict() || s.is_not_found() => Ok(None),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Stores or replaces a plain record, whatever is there. A write that
    /// meets a newer one (another writer's, or a delete, between our read
    /// and our write) is done: ours counts as written just before it and
    /// overwritten at once, which no reader can tell from a write that
    /// landed. So writers racing on one record all succeed, and the last
    /// one's value stays.
    async fn put(&self, key: &Name, value: &str, ttl: Option<Duration>) -> Result<()> {
        let object = self.object(Space::Plain, key)?;
        match self
            .config_maps
            .get_opt(&object)
            .await
            .map_err(|e| self.fail(e))?
        {
            Some(map) => {
                self.replace(Space::Plain, &object, map.metadata, value, ttl)
                    .await?;
            }
            None => {
                self.write_if_absent(Space::Plain, key, value, ttl).await?;
            }
        }
        Ok(())
    }

    /// The ConfigMap of a record: `meta` (a version to write on, or none)
    /// with its name, labels and expiry.
    fn config_map(
        &self,
        space: Space,
        mut meta: ObjectMeta,
        object: &str,
        value: &str,
        ttl: Option<Duration>,
    ) -> ConfigMap {
        meta.name = Some(object.to_string());
        meta.namespace = Some(self.namespace.clone());
        meta.labels
            .get_or_insert_with(BTreeMap::new)
            .insert(KIND.to_string(), space.label().to_string());
        let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
        match ttl {
            Some(ttl) => {
                let at = now_ms().saturating_add(ttl.as_millis().min(u64::MAX as u128) as u64);
                annotations.insert(EXPIRES.to_string(), at.to_string());
            }
            None => {
                annotations.remove(EXPIRES);
            }
        }
        ConfigMap {
            metadata: meta,
            data: Some(BTreeMap::from([("value".to_string(), value.to_string())])),
            ..ConfigMap::default()
        }
    }
}

/// The stored value (empty if someone removed it by hand).
fn value_of(map: &ConfigMap) -> String {
    map.data
        .as_ref()
        .and_then(|d| d.get("value"))
        .cloned()
        .unwrap_or_default()
}

/// Whether the record's expiry (by this host's clock) is still ahead.
fn is_live(map: &ConfigMap, now_ms: u64) -> bool {
    match map
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXPIRES))
    {
        None => true,
        Some(at) => at.parse::<u64>().is_ok_and(|at| at > now_ms),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
