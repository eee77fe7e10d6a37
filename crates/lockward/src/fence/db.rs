//! A guarded database, whichever engine enforces the fences: the handle
//! the commands use ([`FenceDb`]), and what it reports ([`GuardedTable`],
//! [`StoredFence`]).
//!
//! A guarded table refuses a write unless the writing session carries the
//! fence last claimed for the table's lock; a holder claims its fence right
//! after acquiring the lock (`lockward run --fence-db` does). PostgreSQL
//! checks once per statement ([`postgres::PostgresGuard`](super::postgres::PostgresGuard)),
//! MySQL and MariaDB once per statement and lock, from a row trigger
//! ([`mysql::MysqlGuard`](super::mysql::MysqlGuard)).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::finding::Finding;
use crate::url::StoreUrl;

/// What a guarded table does with a write that carries no fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfenced {
    /// Refused (`LW002`): the default, since a pooler or a connection
    /// string with its own options silently drops the setting.
    Refuse,
    /// Let through: for tables that also have writers that hold no lock.
    Allow,
}

impl Unfenced {
    /// The word the triggers carry: `refuse` or `allow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unfenced::Refuse => "refuse",
            Unfenced::Allow => "allow",
        }
    }
}

/// A table the guard is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedTable {
    /// The table, as the database names it (`public.orders`, `shop.orders`,
    /// or `orders` when on PostgreSQL's search path).
    pub table: String,
    /// The lock whose fence its writes must carry.
    pub lock: String,
    /// What it does with a write that carries no fence.
    pub unfenced: Unfenced,
    /// False when writes go around the guard: someone disabled the
    /// trigger (PostgreSQL's `ALTER TABLE … DISABLE TRIGGER`) or dropped
    /// one of the three (MySQL).
    pub enabled: bool,
}

/// A lock's stored fence: the last one claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFence {
    /// The lock.
    pub lock: String,
    /// The fence writes must carry now.
    pub fence: u64,
    /// When it was claimed, as the server's clock wrote it.
    pub raised_at: String,
    /// The role or account that claimed it.
    pub raised_by: String,
}

/// Which engine a guarded database runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// PostgreSQL: writers carry their fences in `lockward.fences`
    /// (`PGOPTIONS`, or `SET LOCAL`).
    Postgres,
    /// MySQL or MariaDB: writers carry their fences in `@lockward_fences`
    /// (an init command, or `SET` per transaction).
    Mysql,
}

/// A connection to a database whose tables are guarded, on PostgreSQL or
/// MySQL/MariaDB, as its URL says.
///
/// ```no_run
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// use lockward::fence::{FenceDb, Unfenced};
/// let mut db = FenceDb::connect("postgres://app:pw@127.0.0.1/shop").await?;
/// db.install(&["orders".to_string()], "orders", Unfenced::Refuse, None).await?;
/// // Right after acquiring lock "orders" with fence 42:
/// db.claim("orders", 42, Duration::from_secs(5)).await?;
/// # Ok::<(), lockward::Error>(())
/// # });
/// ```
pub enum FenceDb {
    /// On PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(super::postgres::PostgresGuard),
    /// On MySQL or MariaDB.
    #[cfg(feature = "mysql")]
    Mysql(super::mysql::MysqlGuard),
}

/// Calls the same method on whichever engine `$db` is.
macro_rules! each {
    ($db:expr, $guard:ident => $call:expr) => {
        match $db {
            #[cfg(feature = "postgres")]
            FenceDb::Postgres($guard) => $call,
            #[cfg(feature = "mysql")]
            FenceDb::Mysql($guard) => $call,
        }
    };
}

impl FenceDb {
    /// Connects to the database of a `postgres://` or `mysql://` URL (the
    /// same forms as the stores'; their `table=` and `mode=` are ignored).
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &str) -> Result<FenceDb> {
        match StoreUrl::parse(url)? {
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(_) => Ok(FenceDb::Postgres(
                super::postgres::PostgresGuard::connect(url).await?,
            )),
            #[cfg(feature = "mysql")]
            StoreUrl::Mysql(_) => Ok(FenceDb::Mysql(
                super::mysql::MysqlGuard::connect(url).await?,
            )),
            #[cfg(not(feature = "postgres"))]
            StoreUrl::Postgres(_) => Err(not_built("postgres")),
            #[cfg(not(feature = "mysql"))]
            StoreUrl::Mysql(_) => Err(not_built("mysql")),
            other => Err(Error::invalid(
                "fence database",
                format!(
                    "{} is not a database that can enforce fences; use postgres:// or mysql://",
                    other.scheme()
                ),
            )),
        }
    }

    /// The engine this database runs on.
    pub fn engine(&self) -> Engine {
        match self {
            #[cfg(feature = "postgres")]
            FenceDb::Postgres(_) => Engine::Postgres,
            #[cfg(feature = "mysql")]
            FenceDb::Mysql(_) => Engine::Mysql,
        }
    }

    /// Guards `tables` by the fence of `lock`; `claimer`, when given, is
    /// the one role or account besides the installer that may claim
    /// fences. Installing again replaces the guard and changes nothing
    /// else. Returns the tables guarded, as the database names them.
    ///
    /// Cancellation: on PostgreSQL one transaction, rolled back when
    /// dropped; on MySQL each table's triggers are replaced one statement
    /// at a time, so a dropped call may have guarded some tables.
    pub async fn install(
        &mut self,
        tables: &[String],
        lock: &str,
        unfenced: Unfenced,
        claimer: Option<&str>,
    ) -> Result<Vec<String>> {
        each!(self, g => g.install(tables, lock, unfenced, claimer).await)
    }

    /// Removes the guard from `tables`; with `purge`, also lockward's
    /// objects (the stored fences) once no table is guarded.
    ///
    /// Cancellation: as for [`install`](Self::install).
    pub async fn uninstall(&mut self, tables: &[String], purge: bool) -> Result<Vec<String>> {
        each!(self, g => g.uninstall(tables, purge).await)
    }

    /// The guarded tables of this database.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn guarded(&self) -> Result<Vec<GuardedTable>> {
        each!(self, g => g.guarded().await)
    }

    /// The stored fence of every lock claimed here.
    ///
    /// Cancellation: a read; dropping the future changes nothing.
    pub async fn fences(&self) -> Result<Vec<StoredFence>> {
        each!(self, g => g.fences().await)
    }

    /// Claims `fence` for `lock` once every open transaction that wrote
    /// under the old fence has ended, waiting at most `within`;
    /// [`Error::TimedOut`] names the sessions that held it up,
    /// [`Error::Stale`] says a larger fence was claimed already.
    ///
    /// Cancellation: drop the `FenceDb` too, so the claim's connection
    /// goes; the claim may still complete on the server.
    pub async fn claim(&self, lock: &str, fence: u64, within: Duration) -> Result<u64> {
        each!(self, g => g.claim(lock, fence, within).await)
    }

    /// As [`claim`](Self::claim), but the sessions still holding the claim
    /// up halfway through `within` are ended (their open transactions roll
    /// back); returns the stored fence and the sessions ended.
    ///
    /// Cancellation: as for [`claim`](Self::claim).
    pub async fn claim_ending_stale(
        &self,
        lock: &str,
        fence: u64,
        within: Duration,
    ) -> Result<(u64, Vec<String>)> {
        each!(self, g => g.claim_ending_stale(lock, fence, within).await)
    }

    /// Sets the stored fence of `lock`, also downwards (a repair).
    ///
    /// Cancellation: one statement; dropping the future may or may not
    /// have applied it.
    pub async fn reset(&self, lock: &str, fence: u64) -> Result<()> {
        each!(self, g => g.reset(lock, fence).await)
    }

    /// The findings on this database, for `lockward doctor --fence-db`.
    ///
    /// Cancellation: reads only; dropping the future changes nothing.
    pub async fn diagnose(&self) -> Vec<Finding> {
        each!(self, g => g.diagnose().await)
    }
}

/// The error for a database whose engine this build left out.
#[cfg(not(all(feature = "postgres", feature = "mysql")))]
fn not_built(scheme: &str) -> Error {
    Error::NotBuilt {
        scheme: scheme.into(),
        why: format!("guarded tables on this database need lockward's `{scheme}` cargo feature"),
    }
}
