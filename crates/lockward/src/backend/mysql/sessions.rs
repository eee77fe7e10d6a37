//! Sessions of their own, for the server's named locks (`GET_LOCK`), which
//! belong to the session that took them: taken from the idle ones or
//! opened, given back holding nothing, and ended from another session when
//! a wait on one is given up.

use std::sync::Arc;
use std::time::Instant;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params};

use super::core::{my_error, Db};
use super::url::MysqlUrl;
use crate::backend::sessions::IdleSessions;
use crate::error::Result;

/// The server's name for the named lock of `?` (a string lockward makes):
/// `lockward:` and part of its SHA-256, as the server takes at most 64
/// characters.
pub(super) const KEY: &str = "CONCAT('lockward:', LEFT(SHA2(?, 256), 52))";

/// The sessions of one store.
pub(super) struct Sessions {
    url: MysqlUrl,
    db: Arc<Db>,
    /// Sessions holding nothing, for the next lock or wait.
    idle: IdleSessions<Conn>,
}

impl Sessions {
    pub(super) fn new(url: &MysqlUrl, db: Arc<Db>) -> Sessions {
        Sessions {
            url: url.clone(),
            db,
            idle: IdleSessions::default(),
        }
    }

    /// A session: an idle one (`true`: it may have died since, with a
    /// server restart) or a new one.
    pub(super) async fn take(&self) -> Result<(Conn, bool)> {
        match self.idle.take(|_| true) {
            Some(conn) => Ok((conn, true)),
            None => Ok((self.open().await?, false)),
        }
    }

    /// A new session.
    pub(super) async fn open(&self) -> Result<Conn> {
        self.db.session(&self.url).await
    }

    /// Keeps `conn`, which holds no named lock, for the next one (or
    /// closes it when enough are idle).
    pub(super) fn put_back(&self, conn: Conn) {
        self.idle.put_back(conn);
    }

    /// `conn` about to wait in the server's queue (see [`Waiting`]).
    pub(super) fn waiting(&self, conn: Conn) -> Waiting {
        Waiting {
            conn: Some(conn),
            db: self.db.clone(),
        }
    }

    /// Asks for the named lock of `key` on `conn`, waiting up to `wait_s`
    /// seconds (0: a try). `true` when granted.
    pub(super) async fn get_lock(&self, conn: &mut Conn, key: &[u8], wait_s: u64) -> Result<bool> {
        let got: Option<Option<i64>> = conn
            .exec_first(
                format!("SELECT GET_LOCK({KEY}, ?)"),
                Params::Positional(vec![key.into(), wait_s.into()]),
            )
            .await
            .map_err(|e| my_error(self.db.address(), &e))?;
        Ok(got.flatten() == Some(1))
    }

    /// [`get_lock`](Sessions::get_lock) on `waiting`'s session, given up at
    /// `deadline`: `None` when it came first (drop `waiting` then, which
    /// ends the session and takes it out of the queue).
    pub(super) async fn get_lock_until(
        &self,
        waiting: &mut Waiting,
        key: &[u8],
        wait_s: u64,
        deadline: Option<Instant>,
    ) -> Option<Result<bool>> {
        let asked = self.get_lock(waiting.conn(), key, wait_s);
        match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), asked).await.ok(),
            None => Some(asked.await),
        }
    }

    /// Whether `conn`'s session holds the named lock of `key`.
    pub(super) async fn holds(&self, conn: &mut Conn, key: &[u8]) -> mysql_async::Result<bool> {
        let held: Option<Option<i64>> = conn
            .exec_first(
                format!("SELECT IS_USED_LOCK({KEY}) = CONNECTION_ID()"),
                Params::Positional(vec![key.into()]),
            )
            .await?;
        Ok(held.flatten() == Some(1))
    }

    /// Lets go of the named lock of `key` on `conn`; `true` when it held it.
    pub(super) async fn release_lock(
        &self,
        conn: &mut Conn,
        key: &[u8],
    ) -> mysql_async::Result<bool> {
        let released: Option<Option<i64>> = conn
            .exec_first(
                format!("SELECT RELEASE_LOCK({KEY})"),
                Params::Positional(vec![key.into()]),
            )
            .await?;
        Ok(released.flatten() == Some(1))
    }

    /// The condition that the named lock of `prefix || name` is held by the
    /// session in column `session`, for a query over the lock table.
    pub(super) fn held_by_session_sql() -> String {
        "IS_USED_LOCK(CONCAT('lockward:', LEFT(SHA2(CONCAT(?, name), 256), 52))) = session"
            .to_string()
    }
}

/// A session waiting in the server's queue; ended if the wait is given up,
/// so the server takes it out of the queue (and frees a lock granted at
/// that very moment).
pub(super) struct Waiting {
    conn: Option<Conn>,
    db: Arc<Db>,
}

impl Waiting {
    /// The session.
    pub(super) fn conn(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a Waiting holds its session until taken")
    }

    /// The session back, the wait over.
    pub(super) fn take(mut self) -> Conn {
        self.conn
            .take()
            .expect("a Waiting holds its session until taken")
    }

    /// Swaps a dead session for `conn`.
    pub(super) fn replace(&mut self, conn: Conn) {
        self.conn = Some(conn);
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let (db, id) = (self.db.clone(), conn.id());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                // Its own session cannot be asked while it waits: another
                // one ends it.
                let _ = db.exec("KILL ?", Params::Positional(vec![id.into()])).await;
                drop(conn);
            });
        }
    }
}
