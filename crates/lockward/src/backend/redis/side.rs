//! Redis's side client: `SET` as the floor, `used_memory` as the size, and
//! bare `SET NX PX` keys as the memory floor of a lock.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::conn::Conn;
use super::url::RedisUrl;
use crate::backend::side_client::{ServerBytes, SideClient};
use crate::error::{Error, Result};
use crate::owner::OwnerId;

/// A plain connection to one Redis server.
pub struct RedisSide {
    conn: Conn,
    address: String,
}

impl RedisSide {
    /// Connects to the server of `url`.
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &RedisUrl) -> Result<RedisSide> {
        let address = url.to_string();
        let conn = Conn::connect(url, None, false)
            .await
            .map_err(|e| Error::Unavailable {
                address: address.clone(),
                message: e.to_string(),
                cause: None,
            })?;
        Ok(RedisSide { conn, address })
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        cmd.query_async(&mut self.conn.clone())
            .await
            .map_err(|e| Error::Unavailable {
                address: self.address.clone(),
                message: e.to_string(),
                cause: None,
            })
    }

    async fn used_memory(&self) -> Result<Option<u64>> {
        let info: String = self.query(redis::cmd("INFO").arg("memory")).await?;
        Ok(info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok()))
    }
}

#[async_trait]
impl SideClient for RedisSide {
    async fn floor_round_trip(&mut self) -> Result<Duration> {
        let began = Instant::now();
        self.query::<()>(redis::cmd("SET").arg("lockward-bench-floor").arg("1"))
            .await?;
        Ok(began.elapsed())
    }

    async fn server_bytes(&mut self) -> Result<Option<ServerBytes>> {
        Ok(self.used_memory().await?.map(|bytes| ServerBytes {
            bytes,
            what: "used_memory",
        }))
    }

    /// Pipelined, 1,000 keys at a time.
    async fn bare_lock_bytes(&mut self, prefix: &str, n: usize) -> Result<Option<f64>> {
        let Some(before) = self.used_memory().await? else {
            return Ok(None);
        };
        let token = OwnerId::random().to_string();
        let all: Vec<usize> = (0..n).collect();
        for chunk in all.chunks(1000) {
            let mut pipe = redis::pipe();
            for i in chunk {
                pipe.cmd("SET")
                    .arg(format!("{prefix}/bare/{i}"))
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(600_000)
                    .ignore();
            }
            pipe.query_async::<()>(&mut self.conn.clone())
                .await
                .map_err(|e| Error::Unavailable {
                    address: self.address.clone(),
                    message: e.to_string(),
                    cause: None,
                })?;
        }
        let after = self.used_memory().await?.unwrap_or(before);
        for chunk in all.chunks(1000) {
            let mut del = redis::cmd("UNLINK");
            for i in chunk {
                del.arg(format!("{prefix}/bare/{i}"));
            }
            self.query::<()>(&del).await?;
        }
        Ok(Some(after.saturating_sub(before) as f64 / n.max(1) as f64))
    }
}
