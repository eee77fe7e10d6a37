//! ZooKeeper's records: persistent nodes under `%records` and
//! `%versioned`, their expiry judged on the server's mtime.

use std::time::Duration;

use async_trait::async_trait;
use zookeeper_client as zk;
use zookeeper_client::CreateMode;

use super::core::{now_millis, ZookeeperBackend};
use super::paths;
use crate::backend::{RecordBackend, Versioned};
use crate::error::Result;
use crate::name::Name;

#[async_trait]
impl RecordBackend for ZookeeperBackend {
    async fn insert_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<bool> {
        let path = paths::record_path(&self.root, key.as_str());
        let data = record_data(value, ttl);
        if self.create_record(&path, &data).await? {
            return Ok(true);
        }
        let (old, stat) = match self.data(&path).await? {
            Ok(found) => found,
            Err(zk::Error::NoNode) => return self.create_record(&path, &data).await,
            Err(e) => return Err(self.fail(e)),
        };
        let now = self.server_millis().await?;
        if live_record(&old, &stat, now).is_some() {
            return Ok(false);
        }
        // Expired: replace it, unless someone else did first.
        let version = stat.version;
        match self
            .ask(true, |c| {
                let (path, data) = (path.clone(), data.clone());
                async move { c.set_data(&path, &data, Some(version)).await }
            })
            .await?
        {
            Ok(_) => Ok(true),
            Err(zk::Error::BadVersion | zk::Error::NoNode) => Ok(false),
            Err(e) => Err(self.fail(e)),
        }
    }

    async fn put_record(&self, key: &Name, value: &str, ttl: Duration) -> Result<()> {
        let path = paths::record_path(&self.root, key.as_str());
        let data = record_data(value, ttl);
        for _ in 0..3 {
            match self
                .ask(true, |c| {
                    let (path, data) = (path.clone(), data.clone());
                    async move { c.set_data(&path, &data, None).await }
                })
                .await?
            {
                Ok(_) => return Ok(()),
                Err(zk::Error::NoNode) => {
                    if self.create_record(&path, &data).await? {
                        return Ok(());
                    }
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
        Err(self.fail(zk::Error::NoNode))
    }

    /// The version is the node's data version + 1; the TTL is judged
    /// against the node's `mtime` by this host's clock.
    async fn read_versioned(&self, key: &Name) -> Result<Option<Versioned>> {
        let path = paths::versioned_path(&self.root, key.as_str());
        match self.data(&path).await? {
            Ok((data, stat)) => {
                Ok(
                    live_record(&data, &stat, now_millis()).map(|value| Versioned {
                        value,
                        version: stat.version as u64 + 1,
                    }),
                )
            }
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// A `setData` at the expected version, or a create for version 0 (or
    /// a take-over of an expired node, whose version keeps counting).
    async fn write_versioned(
        &self,
        key: &Name,
        expected: u64,
        value: &str,
        ttl: Duration,
    ) -> Result<Option<u64>> {
        let path = paths::versioned_path(&self.root, key.as_str());
        let data = record_data(value, ttl);
        let set = |version: i32| {
            let (path, data) = (path.clone(), data.clone());
            self.ask(true, move |c| {
                let (path, data) = (path.clone(), data.clone());
                async move { c.set_data(&path, &data, Some(version)).await }
            })
        };
        if expected > 0 {
            let Ok(version) = i32::try_from(expected - 1) else {
                return Ok(None);
            };
            return match set(version).await? {
                Ok(stat) => Ok(Some(stat.version as u64 + 1)),
                Err(zk::Error::BadVersion | zk::Error::NoNode) => Ok(None),
                Err(e) => Err(self.fail(e)),
            };
        }
        let dir = format!("{}/{}", self.root, paths::VERSIONED);
        let opts = self.options(CreateMode::Persistent);
        for _ in 0..3 {
            let created = self
                .ask(true, |c| {
                    let (path, data, opts) = (path.clone(), data.clone(), opts.clone());
                    async move { c.create(&path, &data, &opts).await }
                })
                .await?;
            match created {
                Ok((stat, _)) => return Ok(Some(stat.version as u64 + 1)),
                Err(zk::Error::NoNode) => self.make_parents(&dir).await?,
                Err(zk::Error::NodeExists) => {
                    let found = self.data(&path).await?;
                    let (old, stat) = match found {
                        Ok(found) => found,
                        Err(zk::Error::NoNode) => continue,
                        Err(e) => return Err(self.fail(e)),
                    };
                    if live_record(&old, &stat, now_millis()).is_some() {
                        return Ok(None);
                    }
                    return match set(stat.version).await? {
                        Ok(stat) => Ok(Some(stat.version as u64 + 1)),
                        Err(zk::Error::BadVersion | zk::Error::NoNode) => Ok(None),
                        Err(e) => Err(self.fail(e)),
                    };
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
        Err(self.fail(zk::Error::NoNode))
    }

    /// One read of the record's node, judged on the server's clock.
    async fn record(&self, key: &Name) -> Result<Option<String>> {
        let path = paths::record_path(&self.root, key.as_str());
        match self.data(&path).await? {
            Ok((data, stat)) => Ok(live_record(&data, &stat, self.server_millis().await?)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(self.fail(e)),
        }
    }

    async fn records(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let dir = format!("{}/{}", self.root, paths::RECORDS);
        let Some(children) = self.children(&dir).await? else {
            return Ok(Vec::new());
        };
        let now = self.server_millis().await?;
        let mut out = Vec::new();
        for child in children {
            let Some(key) = paths::unescape(&child).filter(|k| k.starts_with(prefix)) else {
                continue;
            };
            let path = format!("{dir}/{child}");
            match self.data(&path).await? {
                Ok((data, stat)) => {
                    if let Some(value) = live_record(&data, &stat, now) {
                        out.push((key, value));
                    }
                }
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(self.fail(e)),
            }
        }
        out.sort();
        Ok(out)
    }
}

impl ZookeeperBackend {
    /// Creates a record node (and its parent); `false` when it exists.
    async fn create_record(&self, path: &str, data: &[u8]) -> Result<bool> {
        let opts = self.options(CreateMode::Persistent);
        for _ in 0..3 {
            match self
                .ask(true, |c| {
                    let opts = opts.clone();
                    async move { c.create(path, data, &opts).await }
                })
                .await?
            {
                Ok(_) => return Ok(true),
                Err(zk::Error::NodeExists) => return Ok(false),
                Err(zk::Error::NoNode) => {
                    self.make_parents(&format!("{}/{}", self.root, paths::RECORDS))
                        .await?
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
        Err(self.fail(zk::Error::NoNode))
    }
}

/// A record's value: its TTL in ms, a newline, the value.
fn record_data(value: &str, ttl: Duration) -> Vec<u8> {
    format!("{}\n{value}", ttl.as_millis()).into_bytes()
}

/// A record's value, if it is still live at server time `now`.
fn live_record(data: &[u8], stat: &zk::Stat, now: i64) -> Option<String> {
    let text = std::str::from_utf8(data).ok()?;
    let (ttl, value) = text.split_once('\n')?;
    let ttl: i64 = ttl.parse().ok()?;
    (stat.mtime.saturating_add(ttl) > now).then(|| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_expire_on_the_server_clock() {
        let stat = zk::Stat {
            czxid: 1,
            mzxid: 1,
            pzxid: 1,
            ctime: 1_000,
            mtime: 1_000,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        };
        let data = record_data("a\nb", Duration::from_millis(500));
        assert_eq!(live_record(&data, &stat, 1_499).as_deref(), Some("a\nb"));
        assert_eq!(live_record(&data, &stat, 1_500), None);
        assert_eq!(live_record(b"junk", &stat, 0), None);
    }
}
