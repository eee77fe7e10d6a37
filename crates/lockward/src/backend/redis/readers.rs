//! The read side of a read-write lock, kept by Redis beside the name's lock
//! key: a sorted set of readers by lease expiry (`keys::Keys::readers`).
//!
//! A reader is admitted in one script when no writer holds the lock key and
//! nobody queues ahead of it in the name's line; a writer (any holder of
//! the lock key) is granted only while no reader's lease is live (see
//! `lua/acquire.lua`). Readers and writers wait in the
//! same line, so a waiting writer keeps out the readers behind it; an
//! admitted reader tells the next in line, so readers queued together get
//! in together, and the last reader to leave tells the first in line. A
//! reader's fence comes from the name's counter, as a writer's does: larger
//! than every earlier writer's, smaller than every later one's.

use std::time::Duration;

use redis::Value;

use super::codec::{int, text};
use super::core::RedisBackend;
use super::keys::READERS_SUFFIX;
use crate::error::Result;
use crate::lease::{Holding, LockInfo};

impl RedisBackend {
    /// A row per live reader of the names starting with `prefix`:
    /// `NAME#reader/OWNER`, as `status` shows readers on every store.
    pub(super) async fn list_readers(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let names = self.names_with(prefix, READERS_SUFFIX).await?;
        let mut rows = Vec::new();
        for name in names {
            let keys = self.keys(&name);
            let (reply, _): (Vec<Value>, _) = self
                .invoke(&self.reader_scripts.list.key(&keys.readers))
                .await?;
            for pair in reply.chunks(2) {
                let (Some(owner), Some(left)) =
                    (pair.first().and_then(text), pair.get(1).and_then(int))
                else {
                    continue;
                };
                rows.push(LockInfo {
                    name: format!("{name}#reader/{owner}"),
                    owner,
                    label: None,
                    fence: None,
                    expires_in: u64::try_from(left).ok().map(Duration::from_millis),
                    waiters: None,
                    holding: Holding::Reader {
                        lock: name.to_string(),
                    },
                });
            }
        }
        Ok(rows)
    }
}
