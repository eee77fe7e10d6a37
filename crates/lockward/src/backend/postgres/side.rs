//! PostgreSQL's side client: `SELECT 1` as the floor, the lock table's size
//! as the size.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::core;
use super::url::{PostgresMode, PostgresUrl};
use crate::backend::side_client::{ServerBytes, SideClient};
use crate::error::Result;

/// A plain connection to the server.
pub struct PostgresSide {
    client: tokio_postgres::Client,
    url: PostgresUrl,
    address: String,
}

impl PostgresSide {
    /// Connects to the server of `url`.
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &PostgresUrl) -> Result<PostgresSide> {
        let address = url.to_string();
        let client = core::open(url, &address, |_| {}, || {}).await?;
        Ok(PostgresSide {
            client,
            url: url.clone(),
            address,
        })
    }
}

/// Opens `n` sessions that `LISTEN` on a channel lockward never uses and
/// then stay idle, as another program's listeners in the same database
/// would (PostgreSQL signals every listening session of a database at each
/// `NOTIFY`, whatever its channel). They close when dropped.
///
/// Cancellation: dropping the future closes the sessions opened so far.
pub async fn idle_listeners(url: &PostgresUrl, n: usize) -> Result<Vec<tokio_postgres::Client>> {
    let address = url.to_string();
    let mut sessions = Vec::with_capacity(n);
    for _ in 0..n {
        let client = core::open(url, &address, |_| {}, || {}).await?;
        client
            .batch_execute("LISTEN another_program_channel")
            .await
            .map_err(|e| core::pg_error(&address, &e))?;
        sessions.push(client);
    }
    Ok(sessions)
}

#[async_trait]
impl SideClient for PostgresSide {
    async fn floor_round_trip(&mut self) -> Result<Duration> {
        let began = Instant::now();
        let asked = self.client.query_one("SELECT 1", &[]).await;
        asked.map_err(|e| core::pg_error(&self.address, &e))?;
        Ok(began.elapsed())
    }

    /// Advisory locks live in the server's memory, not in a table: `None`.
    async fn server_bytes(&mut self) -> Result<Option<ServerBytes>> {
        if self.url.mode == PostgresMode::Advisory {
            return Ok(None);
        }
        let row = self
            .client
            .query_one(
                "SELECT pg_total_relation_size($1::regclass)::bigint",
                &[&self.url.table],
            )
            .await
            .map_err(|e| core::pg_error(&self.address, &e))?;
        Ok(u64::try_from(row.get::<_, i64>(0))
            .ok()
            .map(|bytes| ServerBytes {
                bytes,
                what: "lock table size",
            }))
    }
}
