//! The SQLite store: its file, its schema, and the lock seam.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::host_clock;
use crate::backend::{Attempt, Capabilities, LocalReleases, LockBackend, Request, Subscription};
use crate::error::{Cause, Error, Result};
use crate::lease::{Holding, LockInfo};
use crate::name::Name;
use crate::owner::OwnerId;

/// How long a statement waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS lockward_locks (
        name       TEXT PRIMARY KEY,
        owner      BLOB,
        holder     TEXT,
        fence      INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS lockward_records (
        key        TEXT PRIMARY KEY,
        value      TEXT NOT NULL,
        expires_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS lockward_versioned (
        key        TEXT PRIMARY KEY,
        value      TEXT NOT NULL,
        version    INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS lockward_meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;
";

/// The SQLite backend.
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    pub(super) path: PathBuf,
    pub(super) conn: Arc<Mutex<Connection>>,
    /// This process's releases, which wake its waiters at once (other
    /// processes' are polled for).
    local: Arc<LocalReleases>,
}

impl SqliteBackend {
    /// Opens (creating if needed) the database at `path`, and its folder.
    ///
    /// Cancellation: dropping the future stops waiting for the file; the
    /// blocking open finishes in the background, and a table it created stays.
    pub async fn open(path: &Path) -> Result<Self> {
        let path = path.to_path_buf();
        let opened = path.clone();
        let conn = tokio::task::spawn_blocking(move || open_blocking(&opened))
            .await
            .map_err(|e| unavailable(&path, format!("the opening thread failed: {e}")))??;
        Ok(SqliteBackend {
            path,
            conn: Arc::new(Mutex::new(conn)),
            local: Arc::default(),
        })
    }

    /// Runs `f` on the connection on the blocking pool.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = self.conn.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn).map_err(|e| sql_error(&path, e))
        })
        .await
        .map_err(|e| unavailable(&self.path, format!("the SQLite thread failed: {e}")))?
    }
}

fn unavailable(path: &Path, message: impl Into<String>) -> Error {
    Error::Unavailable {
        address: format!("sqlite://{}", path.display()),
        message: message.into(),
        cause: None,
    }
}

fn sql_error(path: &Path, e: rusqlite::Error) -> Error {
    Error::Unavailable {
        address: format!("sqlite://{}", path.display()),
        message: e.to_string(),
        cause: Some(Cause::of(&e)),
    }
}

fn open_blocking(path: &Path) -> Result<Connection> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            unavailable(
                path,
                format!("cannot create the folder {}: {e}", dir.display()),
            )
        })?;
    }
    let conn = Connection::open(path).map_err(|e| {
        unavailable(
            path,
            format!("cannot open the database file (is the folder writable?): {e}"),
        )
    })?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| sql_error(path, e))?;
    // WAL lets readers (status) run beside a writer; NORMAL sync is durable
    // against process crashes, and an OS crash frees every lock anyway.
    // Many processes may open a fresh file at once, and SQLite answers some
    // of them "database is locked" without waiting (switching the journal,
    // or a schema read that must become a write): those steps retry.
    retry_busy(|| {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // The write lock is taken up front, so the busy timeout applies.
        conn.execute_batch(&format!("BEGIN IMMEDIATE; {SCHEMA} COMMIT;"))
            .inspect_err(|_| {
                let _ = conn.execute_batch("ROLLBACK");
            })
    })
    .map_err(|e| {
        unavailable(
            path,
            format!("cannot initialise the lock tables (is the file writable?): {e}"),
        )
    })?;
    retry_busy(|| forget_previous_boot(&conn)).map_err(|e| sql_error(path, e))?;
    Ok(conn)
}

/// Runs `step` again while SQLite says the database is busy or locked, with
/// a short jittered pause, for up to [`BUSY_TIMEOUT`].
fn retry_busy<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let give_up = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match step() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && std::time::Instant::now() < give_up =>
            {
                std::thread::sleep(Duration::from_micros(fastrand::u64(1_000..20_000)));
            }
            other => return other,
        }
    }
}

/// Frees every lock recorded under another boot: their holders are gone and
/// their expiry times belong to a clock that restarted.
fn forget_previous_boot(conn: &Connection) -> rusqlite::Result<()> {
    let boot = host_clock::boot_id();
    let recorded: Option<String> = conn
        .query_row(
            "SELECT value FROM lockward_meta WHERE key = 'boot_id'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if recorded.as_deref() == Some(boot.as_str()) {
        return Ok(());
    }
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    let recorded: Option<String> = tx
        .query_row(
            "SELECT value FROM lockward_meta WHERE key = 'boot_id'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if recorded.as_deref() != Some(boot.as_str()) {
        tx.execute(
            "UPDATE lockward_locks SET owner = NULL, holder = NULL, expires_at = 0",
            [],
        )?;
        tx.execute(
            "INSERT INTO lockward_meta (key, value) VALUES ('boot_id', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [&boot],
        )?;
    }
    tx.commit()
}

pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn remaining(expires_at: i64, now: i64) -> Duration {
    Duration::from_millis(u64::try_from(expires_at - now).unwrap_or(0))
}

/// What SqliteBackend guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: false,
    pushed_wakeups: false,
    server_detects_loss: false,
    server_clock: false,
    expires: true,
    durable: true,
    cross_process: true,
    cross_host: false,
    permanent_records: true,
    native_rw_lock: false,
    native_semaphore: false,
};

#[async_trait]
impl LockBackend for SqliteBackend {
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn address(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }

    /// Polls for other processes' releases; this process's own wake its
    /// waiters at once.
    async fn subscribe(&self, name: &Name) -> Result<Subscription> {
        Ok(Subscription::polling_and(self.local.subscribe(name)))
    }

    async fn try_acquire(&self, req: &Request<'_>) -> Result<Attempt> {
        let name = req.name.as_str().to_string();
        let owner = *req.owner.as_bytes();
        let label = req.label.map(str::to_string);
        let ttl = millis(req.ttl);
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = host_clock::now_ms();
            let row: Option<(Option<Vec<u8>>, i64)> = tx
                .prepare_cached("SELECT owner, expires_at FROM lockward_locks WHERE name = ?1")?
                .query_row([&name], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let attempt = match row {
                Some((Some(_), expires_at)) if expires_at > now => Attempt::Held {
                    expires_in: Some(remaining(expires_at, now)),
                },
                _ => {
                    // max(fence + 1, the wall clock in µs): a file restored
                    // from an older copy does not hand its fences out again.
                    let fence: i64 = tx
                        .prepare_cached(
                            "INSERT INTO lockward_locks (name, owner, holder, fence, expires_at)
                             VALUES (?1, ?2, ?3, max(1, ?5), ?4)
                             ON CONFLICT (name) DO UPDATE SET owner = excluded.owner,
                                 holder = excluded.holder, fence = max(fence + 1, ?5),
                                 expires_at = excluded.expires_at
                             RETURNING fence",
                        )?
                        .query_row(
                            params![name, &owner[..], label, now + ttl, host_clock::wall_us()],
                            |r| r.get(0),
                        )?;
                    Attempt::Granted {
                        fence: fence as u64,
                    }
                }
            };
            tx.commit()?;
            Ok(attempt)
        })
        .await
    }

    async fn extend(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let key = name.as_str().to_string();
        let owner = *owner.as_bytes();
        let ttl = millis(ttl);
        let changed = self
            .run(move |conn| {
                let now = host_clock::now_ms();
                conn.prepare_cached(
                    "UPDATE lockward_locks SET expires_at = ?3
                     WHERE name = ?1 AND owner = ?2 AND expires_at > ?4",
                )?
                .execute(params![key, &owner[..], now + ttl, now])
            })
            .await?;
        crate::backend::owner_checked(name, changed as u64)
    }

    async fn release(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let key = name.as_str().to_string();
        let owner = *owner.as_bytes();
        let changed = self
            .run(move |conn| {
                conn.prepare_cached(
                    "UPDATE lockward_locks SET owner = NULL, holder = NULL, expires_at = 0
                     WHERE name = ?1 AND owner = ?2 AND expires_at > ?3",
                )?
                .execute(params![key, &owner[..], host_clock::now_ms()])
            })
            .await?;
        let released = crate::backend::owner_checked(name, changed as u64);
        if released.is_ok() {
            self.local.released(name);
        }
        released
    }

    async fn force_hold_back(
        &self,
        name: &Name,
        holder: &LockInfo,
        placeholder: OwnerId,
        label: &str,
    ) -> Result<()> {
        let Some(owner) = OwnerId::from_hex(&holder.owner) else {
            return crate::backend::owner_checked(name, 0);
        };
        let (key, label) = (name.as_str().to_string(), label.to_string());
        let (owner, placeholder) = (*owner.as_bytes(), *placeholder.as_bytes());
        let changed = self
            .run(move |conn| {
                conn.prepare_cached(
                    "UPDATE lockward_locks SET owner = ?3, holder = ?4
                     WHERE name = ?1 AND owner = ?2 AND expires_at > ?5",
                )?
                .execute(params![
                    key,
                    &owner[..],
                    &placeholder[..],
                    label,
                    host_clock::now_ms()
                ])
            })
            .await?;
        crate::backend::owner_checked(name, changed as u64)
    }

    async fn inspect(&self, name: &Name) -> Result<Option<LockInfo>> {
        let prefix = name.as_str().to_string();
        let held = self.list_matching(prefix, true).await?;
        Ok(held.into_iter().next())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        self.list_matching(prefix.to_string(), false).await
    }
}

impl SqliteBackend {
    pub(super) async fn list_matching(
        &self,
        pattern: String,
        exact: bool,
    ) -> Result<Vec<LockInfo>> {
        self.run(move |conn| {
            let now = host_clock::now_ms();
            let mut stmt = conn.prepare_cached(
                "SELECT name, owner, holder, fence, expires_at FROM lockward_locks
                 WHERE owner IS NOT NULL AND expires_at > ?1
                   AND (CASE WHEN ?3 THEN name = ?2 ELSE substr(name, 1, length(?2)) = ?2 END)
                 ORDER BY name",
            )?;
            let rows = stmt.query_map(params![now, pattern, exact], |r| {
                let owner: Vec<u8> = r.get(1)?;
                let fence: i64 = r.get(3)?;
                let expires_at: i64 = r.get(4)?;
                Ok(LockInfo {
                    name: r.get(0)?,
                    owner: owner.iter().map(|b| format!("{b:02x}")).collect(),
                    label: r.get(2)?,
                    fence: Some(fence as u64),
                    expires_in: Some(remaining(expires_at, now)),
                    waiters: None,
                    holding: Holding::Lock,
                })
            })?;
            rows.collect()
        })
        .await
    }
}
