//! Fenced writes to Redis: one script compares the stored fence and writes.

use async_trait::async_trait;
use redis::aio::ConnectionManager;
use redis::Script;

use super::{Fenced, FencedResource};
use crate::error::{Error, Result};

/// KEYS: the hash. ARGV: value, fence. `{1}` when written, else `{0, current}`.
const WRITE: &str = r#"
local current = redis.call('HGET', KEYS[1], 'fence')
if current and tonumber(current) > tonumber(ARGV[2]) then return {0, current} end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2])
return {1}
"#;

/// KEYS: the register's hash. ARGV: fence. Raises the fence, keeping the
/// value (an empty one for a new key). Returns `{1}`, or `{0, current}`.
const CLAIM: &str = r#"
local current = redis.call('HGET', KEYS[1], 'fence')
if current and tonumber(current) > tonumber(ARGV[1]) then return {0, current} end
redis.call('HSET', KEYS[1], 'fence', ARGV[1])
redis.call('HSETNX', KEYS[1], 'value', '')
return {1}
"#;

/// Each key is a hash `{value, fence}` under `prefix`.
#[derive(Clone)]
pub struct RedisRegister {
    conn: ConnectionManager,
    prefix: String,
    write: Script,
    claim: Script,
}

impl RedisRegister {
    /// Connects to `url` (a `redis://` URL as redis-rs reads it).
    ///
    /// Cancellation: dropping the future drops the connection attempt; nothing
    /// is written.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self> {
        let unavailable = |e: redis::RedisError| Error::Unavailable {
            address: "redis register".into(),
            message: e.to_string(),
            cause: None,
        };
        let client = redis::Client::open(url).map_err(unavailable)?;
        let conn = ConnectionManager::new(client).await.map_err(unavailable)?;
        Ok(RedisRegister {
            conn,
            prefix: prefix.to_string(),
            write: Script::new(WRITE),
            claim: Script::new(CLAIM),
        })
    }

    fn unavailable(e: redis::RedisError) -> Error {
        Error::Unavailable {
            address: "redis register".into(),
            message: e.to_string(),
            cause: None,
        }
    }
}

impl RedisRegister {
    /// Runs a write or claim script: `{1}` accepted, `{0, current}` stale.
    async fn outcome(
        &self,
        call: &redis::ScriptInvocation<'_>,
        key: &str,
        fence: u64,
    ) -> Result<()> {
        let reply: Vec<redis::Value> = call
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(Self::unavailable)?;
        match reply.first().and_then(crate::backend::redis::codec::int) {
            Some(1) => Ok(()),
            _ => Err(Error::Stale {
                key: key.to_string(),
                fence,
                current: reply
                    .get(1)
                    .and_then(crate::backend::redis::codec::int)
                    .and_then(|c| u64::try_from(c).ok())
                    .unwrap_or(0),
            }),
        }
    }
}

#[async_trait]
impl FencedResource for RedisRegister {
    async fn write(&self, key: &str, value: &[u8], fence: u64) -> Result<()> {
        let mut call = self.write.key(format!("{}{key}", self.prefix));
        call.arg(value).arg(fence);
        self.outcome(&call, key, fence).await
    }

    async fn claim(&self, key: &str, fence: u64) -> Result<()> {
        let mut call = self.claim.key(format!("{}{key}", self.prefix));
        call.arg(fence);
        self.outcome(&call, key, fence).await
    }

    async fn read(&self, key: &str) -> Result<Option<Fenced>> {
        let (value, fence): (Option<Vec<u8>>, Option<u64>) = redis::cmd("HMGET")
            .arg(format!("{}{key}", self.prefix))
            .arg("value")
            .arg("fence")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(Self::unavailable)?;
        Ok(value
            .zip(fence)
            .map(|(value, fence)| Fenced { value, fence }))
    }
}
