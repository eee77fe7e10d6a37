//! PostgreSQL's lease mode: one row per held name, and the lock seam on it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::url::{PostgresMode, PostgresUrl};
use super::{advisory, conn, line, listen};
use crate::backend::{Attempt, Backend, Capabilities, Grant, LockBackend, Request, Subscription};
use crate::error::Result;
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

/// Opens the backend the URL's mode names.
pub async fn connect(url: &PostgresUrl) -> Result<Arc<dyn Backend>> {
    match url.mode {
        PostgresMode::Lease => Ok(Arc::new(LeaseBackend::connect(url).await?)),
        PostgresMode::Advisory => Ok(Arc::new(advisory::AdvisoryBackend::connect(url).await?)),
    }
}

/// The statements of lease mode, for one table.
pub(super) struct Sql {
    pub(super) table: String,
    acquire: String,
    remaining: String,
    release: String,
    extend: String,
    list: String,
    pub(super) line: line::LineSql,
}

impl Sql {
    fn new(t: &str) -> Sql {
        let live = "expires_at > clock_timestamp()";
        let left = "(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint";
        let first = line::first_place(t);
        let first_owner = format!("SELECT owner FROM ({first}) f");
        Sql {
            table: t.to_string(),
            // Granted when the row is free or expired and nobody queues
            // ahead (the first live place is ours, or there is none); a
            // grant takes our place out of the line. Concurrent grants
            // serialise on the row (ON CONFLICT); a waiter that joins
            // meanwhile joins behind.
            acquire: format!(
                "WITH got AS (
                     INSERT INTO {t} AS l (name, owner, holder, fence, expires_at)
                     SELECT $1, $2, $3, nextval('{t}_fence'), clock_timestamp() + $4::bigint * interval '1 millisecond'
                     WHERE NOT EXISTS (SELECT 1 FROM ({first}) f WHERE f.owner <> $2)
                     ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, holder = excluded.holder,
                         fence = nextval('{t}_fence'), expires_at = excluded.expires_at, pid = NULL
                     WHERE l.expires_at <= clock_timestamp()
                     RETURNING fence),
                 placed AS (DELETE FROM {t}_line WHERE name = $1 AND owner = $2 AND EXISTS (SELECT 1 FROM got))
                 SELECT fence FROM got"
            ),
            remaining: format!("SELECT {left} FROM {t} WHERE name = $1 AND {live}"),
            // Tells watchers of the table, and the next in line on its own
            // channel, which wakes that waiter only.
            release: format!(
                "WITH gone AS (DELETE FROM {t} WHERE name = $1 AND owner = $2 AND {live} RETURNING name)
                 SELECT pg_notify('{t}', name),
                        CASE WHEN next.owner IS NOT NULL THEN pg_notify('lockward_' || next.owner, name) END
                 FROM gone LEFT JOIN ({first_owner}) next ON true"
            ),
            extend: format!(
                "UPDATE {t} SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
                 WHERE name = $1 AND owner = $2 AND {live}"
            ),
            list: format!(
                "SELECT name, owner, holder, fence, {left} FROM {t}
                 WHERE starts_with(name, $1) AND {live} ORDER BY name"
            ),
            line: line::LineSql::new(t),
        }
    }
}

/// Lease mode.
pub struct LeaseBackend {
    pub(super) address: String,
    pub(super) shared: Arc<conn::Shared>,
    pub(super) listener: Arc<listen::Listener>,
    pub(super) sql: Sql,
}

pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

pub(super) fn remaining(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

impl LeaseBackend {
    /// Connects and creates the table if needed.
    pub async fn connect(url: &PostgresUrl) -> Result<Self> {
        let address = url.to_string();
        let client = conn::open(url, &address, |_| {}, || {}).await?;
        conn::create_schema(&client, &url.table, &address).await?;
        Ok(LeaseBackend {
            shared: Arc::new(conn::Shared::new(url.clone(), address.clone(), client)),
            listener: listen::Listener::new(url.clone(), address.clone()),
            sql: Sql::new(&url.table),
            address,
        })
    }

    pub(super) async fn run(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        self.shared.query(sql, params).await
    }
}

fn info(row: &tokio_postgres::Row) -> LockInfo {
    LockInfo {
        name: row.get(0),
        owner: row.get(1),
        holder: row.get(2),
        fence: u64::try_from(row.get::<_, i64>(3)).ok(),
        expires_in: Some(remaining(row.get(4))),
        waiters: None,
    }
}

/// What LeaseBackend guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: true,
    pushed_wakeups: true,
    server_detects_loss: false,
    server_clock: true,
    expires: true,
    durable: true,
    cross_process: true,
    cross_host: true,
    permanent_records: true,
    native_rw_lock: false,
};

#[async_trait]
impl LockBackend for LeaseBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        self.address.clone()
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        let owner = req.owner.to_string();
        let ttl = millis(req.ttl);
        let rows = self
            .run(
                &self.sql.acquire,
                &[&req.name.as_str(), &owner, &req.label, &ttl],
            )
            .await?;
        if let Some(row) = rows.first() {
            let fence: i64 = row.get(0);
            return Ok(Attempt::Granted {
                fence: u64::try_from(fence).unwrap_or(0),
            });
        }
        let rows = self.run(&self.sql.remaining, &[&req.name.as_str()]).await?;
        Ok(Attempt::Held {
            expires_in: rows.first().map(|r| remaining(r.get(0))),
        })
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        crate::backend::acquire_in_line(self, req, deadline).await
    }

    async fn subscribe(&self, name: &Name) -> Result<Subscription> {
        Ok(Subscription::pushed(
            self.listener
                .listen(&self.sql.table, Some(name.as_str()))
                .await?,
        ))
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let extend = format!("{} RETURNING 1", self.sql.extend);
        let rows = self
            .run(&extend, &[&name.as_str(), &owner.to_string(), &millis(ttl)])
            .await?;
        crate::backend::owner_checked(name, rows.len() as u64)
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let rows = self
            .run(&self.sql.release, &[&name.as_str(), &owner.to_string()])
            .await?;
        crate::backend::owner_checked(name, rows.len() as u64)
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let held = self.list(name.as_str()).await?;
        Ok(held.into_iter().find(|i| i.name == name.as_str()))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let rows = self.run(&self.sql.list, &[&prefix]).await?;
        Ok(rows.iter().map(info).collect())
    }
}

impl super::records::RecordTables for LeaseBackend {
    fn shared(&self) -> &conn::Shared {
        &self.shared
    }

    fn table(&self) -> &str {
        &self.sql.table
    }
}
