//! PostgreSQL's lease mode: one row per held name, and the lock seam on it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::baton::{self, BatonRow, Batons, BATON_IDLE, HOLDER_IDLE_MARGIN};
use super::permit_sql::PermitSql;
use super::sessions::{Session, Sessions};
use super::statements::Sql;
use super::url::PostgresUrl;
use super::{core, listen};
use crate::backend::channel_waiters::Waiter;
use crate::backend::time::{from_millis, millis};
use crate::backend::{
    Attempt, Capabilities, Grant, LockBackend, PermitBackend, Request, Subscription,
};
use crate::error::Result;
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// How long a watch marks its name as watched (releases notify meanwhile).
const WATCH_KEEP: Duration = Duration::from_secs(600);

/// Lease mode.
pub struct PostgresLeaseBackend {
    pub(super) address: String,
    pub(super) shared: Arc<core::Shared>,
    pub(super) listener: Arc<listen::Listener>,
    pub(super) sql: Sql,
    pub(super) permit_sql: PermitSql,
    batons: Batons,
}

impl PostgresLeaseBackend {
    /// Connects and creates the table if needed.
    ///
    /// Cancellation: dropping the future drops the connection attempt; a table
    /// it created stays.
    pub async fn connect(url: &PostgresUrl) -> Result<Self> {
        let address = url.to_string();
        let client = core::open(url, &address, |_| {}, || {}).await?;
        core::create_schema(&client, &url.table, &address).await?;
        let batons_work = core::ends_idle_sessions(&client).await;
        Ok(PostgresLeaseBackend {
            shared: Arc::new(core::Shared::new(url.clone(), address.clone(), client)),
            listener: listen::Listener::new(url.clone(), address.clone()),
            sql: Sql::new(&url.table),
            permit_sql: PermitSql::new(&url.table),
            batons: Batons::new(Sessions::new(url, &address), batons_work),
            address,
        })
    }
}

#[async_trait]
impl BatonRow for PostgresLeaseBackend {
    /// One try at the row of `req`, on the shared connection.
    async fn attempt(&self, req: &Request<'_>) -> Result<Attempt> {
        let owner = req.owner.to_string();
        let params: [&(dyn ToSql + Sync); 4] =
            [&req.name.as_str(), &owner, &req.label, &millis(req.ttl)];
        let rows = self.run(&self.sql.acquire, &params).await?;
        Ok(Self::granted_or_held(rows.first()))
    }

    /// One try at the row of `req` on `client`, the session holding the
    /// name's baton (where a free row is ours); granted, the server ends
    /// the session once it idles past the lease.
    async fn attempt_with_baton(&self, req: &Request<'_>, client: &Session) -> Result<Attempt> {
        let owner = req.owner.to_string();
        let (ttl, idle) = (
            millis(req.ttl),
            baton::setting(req.ttl + HOLDER_IDLE_MARGIN),
        );
        let rows = client
            .query(
                &self.sql.acquire_with_baton,
                &[&req.name.as_str(), &owner, &req.label, &ttl, &idle],
            )
            .await
            .map_err(|e| core::pg_error(&self.address, &e))?;
        Ok(Self::granted_or_held(rows.first()))
    }

    /// Waits up to `bound` on `client` for the baton of `req`'s name, then
    /// tries the row, in one statement. `None` when the bound passed;
    /// else the baton is this session's, and the try's answer comes with,
    /// when granted, how long the server waited for the baton first.
    async fn wait_then_attempt(
        &self,
        req: &Request<'_>,
        client: &Session,
        bound: Duration,
    ) -> Result<Option<(Attempt, Duration)>> {
        let owner = req.owner.to_string();
        let (ttl, keep) = (
            millis(req.ttl),
            baton::setting(req.ttl + HOLDER_IDLE_MARGIN),
        );
        let (timeout, idle) = (baton::setting(bound), baton::setting(BATON_IDLE));
        let rows = client
            .query(
                &self.sql.wait_then_acquire,
                &[
                    &req.name.as_str(),
                    &owner,
                    &req.label,
                    &ttl,
                    &keep,
                    &timeout,
                    &idle,
                ],
            )
            .await;
        match rows {
            Ok(rows) => {
                let waited = rows.first().and_then(|r| r.get::<_, Option<i64>>(2));
                let waited = Duration::from_micros(waited.map_or(0, |us| us.max(0) as u64));
                Ok(Some((Self::granted_or_held(rows.first()), waited)))
            }
            // 55P03: lock_timeout; 57014: a statement_timeout of the server's.
            Err(e)
                if e.code()
                    .is_some_and(|c| matches!(c.code(), "55P03" | "57014")) =>
            {
                Ok(None)
            }
            Err(e) => Err(core::pg_error(&self.address, &e)),
        }
    }

    /// For the baton's holder waiting out a holder that took the row
    /// without the baton: a wakeup at the row's release, asked for in the
    /// row (so that release notifies). `None` when the row was no longer
    /// held, else the holder's time left.
    async fn tell_me_of_release(&self, name: &Name) -> Result<Option<(Waiter, Duration)>> {
        let wakeup = self
            .listener
            .listen(&self.sql.table, Some(name.as_str()))
            .await?;
        let rows = self
            .run(&self.sql.ask_to_be_told, &[&name.as_str()])
            .await?;
        Ok(rows.first().map(|r| (wakeup, from_millis(r.get(0)))))
    }
}

impl PostgresLeaseBackend {
    /// The attempt's answer, from its row: the fence, or how long the
    /// holder's lease has left (no row: free, but not ours).
    fn granted_or_held(row: Option<&Row>) -> Attempt {
        match row.map(|r| (r.get::<_, Option<i64>>(0), r.get::<_, Option<i64>>(1))) {
            Some((Some(fence), _)) => Attempt::Granted {
                fence: u64::try_from(fence).unwrap_or(0),
            },
            Some((None, left)) => Attempt::Held {
                expires_in: left.map(from_millis),
            },
            None => Attempt::Held { expires_in: None },
        }
    }

    /// Renews on the session keeping the baton, which also tells the
    /// server it is not idle; `None` when that session is gone.
    async fn extend_with_baton(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Option<u64> {
        let client = self.batons.keeper(name, owner)?;
        let idle = baton::setting(ttl + HOLDER_IDLE_MARGIN);
        let renewed = client
            .query(
                &self.sql.extend_with_baton,
                &[&name.as_str(), &owner.to_string(), &millis(ttl), &idle],
            )
            .await;
        match renewed {
            Ok(rows) => rows.first().map(|r| r.get::<_, i64>(0) as u64),
            Err(_) => {
                // The row is still the lock: renewed on the shared
                // connection; the baton went with the session.
                self.batons.forget(name, owner);
                None
            }
        }
    }

    /// Releases on the session keeping the baton and passes the baton in
    /// the same statement; `None` when that session is gone.
    async fn release_with_baton(&self, name: &Name, owner: OwnerId) -> Option<u64> {
        let client = self.batons.forget(name, owner)?;
        let released = client
            .query(
                &self.sql.release_with_baton,
                &[&name.as_str(), &owner.to_string()],
            )
            .await;
        match released {
            Ok(rows) => {
                let count = rows.first().map_or(0, |r| r.get::<_, i64>(0) as u64);
                self.batons.reuse(client);
                Some(count)
            }
            // Dropped, the session closes and the baton passes.
            Err(_) => None,
        }
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
        label: row.get(2),
        fence: u64::try_from(row.get::<_, i64>(3)).ok(),
        expires_in: Some(from_millis(row.get(4))),
        waiters: None,
        holding: Holding::Lock,
    }
}

/// What PostgresLeaseBackend guarantees, known without a connection (its
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
    native_semaphore: true,
};

#[async_trait]
impl LockBackend for PostgresLeaseBackend {
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
        self.attempt(req).await
    }

    async fn acquire(&self, req: &Request<'_>, deadline: Option<Instant>) -> Result<Option<Grant>> {
        if let Some(over) =
            crate::backend::recheck::first_attempt(self.try_acquire(req), deadline).await?
        {
            return Ok(over);
        }
        self.batons.wait(self, req, deadline).await
    }

    async fn subscribe(&self, name: &Name) -> Result<Subscription> {
        // Releases of the name notify while the mark lasts; a watch kept
        // longer falls back to its own re-checks.
        self.run(&self.sql.watch, &[&name.as_str(), &millis(WATCH_KEEP)])
            .await?;
        Ok(Subscription::pushed(
            self.listener
                .listen(&self.sql.table, Some(name.as_str()))
                .await?,
        ))
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        if let Some(renewed) = self.extend_with_baton(name, owner, ttl).await {
            return crate::backend::owner_checked(name, renewed);
        }
        let rows = self
            .run(
                &self.sql.extend,
                &[&name.as_str(), &owner.to_string(), &millis(ttl)],
            )
            .await?;
        crate::backend::owner_checked(name, rows.len() as u64)
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        if let Some(released) = self.release_with_baton(name, owner).await {
            return crate::backend::owner_checked(name, released);
        }
        let rows = self
            .run(&self.sql.release, &[&name.as_str(), &owner.to_string()])
            .await?;
        let released = rows.first().map_or(0, |r| r.get::<_, i64>(0) as u64);
        crate::backend::owner_checked(name, released)
    }

    async fn force_hold_back(
        &self,
        name: &Name,
        holder: &LockInfo,
        placeholder: OwnerId,
        label: &str,
    ) -> Result<()> {
        let rows = self
            .run(
                &self.sql.hold_back,
                &[
                    &name.as_str(),
                    &holder.owner,
                    &placeholder.to_string(),
                    &label,
                ],
            )
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

impl super::records::RecordTables for PostgresLeaseBackend {
    fn shared(&self) -> &core::Shared {
        &self.shared
    }

    fn table(&self) -> &str {
        &self.sql.table
    }
}
