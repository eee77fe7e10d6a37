//! Lease mode's waiting: a baton per name, a session advisory lock that
//! the server's lock manager hands from waiter to waiter in the order they
//! asked, waking exactly one backend per handoff (no LISTEN, so the number
//! of listeners in the database, lockward's or another program's, costs
//! nothing).
//!
//! The lease row stays the lock (server clock, fence); the baton says
//! whose turn it is. A free lock nobody waits for is taken without it. A
//! waiter asks for the baton on a session of its own and waits for it in
//! the server; the one that has it tries the row on that session, where a
//! free row is its alone (the taking statement asks that the baton be free
//! or this session's: see [`super::lease`]), polling (1 → 50 ms, and at the
//! holder's expiry) until it is granted, and keeps the baton while it holds
//! the lock. Its release lets go of the baton in the same statement that
//! deletes the row, which wakes the next waiter: under contention handoffs
//! are pushed and go in the order the waiters asked, and a holder that
//! releases and asks again queues behind them.
//!
//! A session that keeps a baton is ended by the server when it falls idle
//! for too long (`idle_session_timeout`, PostgreSQL 14 and later): a waiter
//! holding the baton polls far more often than [`BATON_IDLE`], a holder
//! renews on that session, so only a stuck one (paused, cut off) falls
//! idle, and the server ends its session, which passes the baton on: at the
//! holder's lease's end, or `BATON_IDLE` after a waiter stopped. A session
//! that ends (a crash) gives the baton up with it. A waiter costs one
//! session while it waits; when none can be opened (the server's
//! `max_connections`), or the server is older than 14, it polls the row as
//! a store that pushes nothing.
//!
//! Sessions, hence batons, do not survive a pooler in transaction mode
//! (PgBouncer): there the waiters would share server sessions. Connect
//! waiters directly, or through a session-mode pool.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::types::Type;
use tokio_postgres::Client;

use super::lease::{millis, LeaseBackend};
use super::sessions::{Sessions, Waiting};
use crate::backend::wait::{
    sleep_within, Backoff, EXPIRY_MARGIN, OUTAGE_MAX, OUTAGE_MIN, POLL_MAX, POLL_MIN,
};
use crate::backend::{Attempt, Grant, Request};
use crate::error::{Error, Result};
use crate::name::Name;
use crate::owner::OwnerId;

/// How long a waiter holding the baton may fall idle before the server
/// ends its session (it polls at least every `POLL_MAX`).
pub(super) const BATON_IDLE: Duration = Duration::from_secs(1);

/// How long past its lease a holder's baton session may stay idle.
pub(super) const HOLDER_IDLE_MARGIN: Duration = Duration::from_millis(100);

/// A waiter in the server's queue looks at the row again at least this
/// often (nothing needs it; it bounds what a lost wakeup could cost). Every
/// waiter uses the same bound, so they rejoin in the order they joined.
const WAIT_CAP: Duration = Duration::from_secs(30);

/// How long past its `lock_timeout` a wait for the baton may go without an
/// answer before the server counts as gone.
const ANSWER_MARGIN: Duration = Duration::from_secs(2);

/// The baton's key, `hashtextextended('TABLE#baton:NAME', 0)`, in SQL over
/// the name in `$n` (never an advisory-mode key, which is `TABLE:NAME`).
pub(super) fn key_sql(table: &str, n: u8) -> String {
    format!("hashtextextended('{table}#baton:' || ${n}::text, 0)")
}

/// `value` as a setting in milliseconds, for `set_config`.
pub(super) fn setting(value: Duration) -> String {
    millis(value).max(1).to_string()
}

/// The batons of one store: its sessions, and the batons its holders keep.
pub(super) struct Batons {
    sessions: Sessions,
    /// Whether the server ends idle sessions (PostgreSQL 14 and later);
    /// without that a stuck baton could stall its line, so waiters poll.
    enabled: bool,
    ask: String,
    kept: Mutex<HashMap<(Name, OwnerId), Arc<Client>>>,
}

impl Batons {
    pub(super) fn new(sessions: Sessions, table: &str, enabled: bool) -> Batons {
        let key = key_sql(table, 1);
        Batons {
            sessions,
            enabled,
            // The settings first (a subquery in FROM runs first): the lock
            // wait reads `lock_timeout` when it starts. A wait that fails
            // rolls the settings back with it.
            ask: format!(
                "SELECT pg_advisory_lock({key}) FROM (
                     SELECT set_config('lock_timeout', $2, false),
                            set_config('idle_session_timeout', $3, false)) s"
            ),
            kept: Mutex::new(HashMap::new()),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<(Name, OwnerId), Arc<Client>>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session keeping the baton of `name` for its holder `owner`.
    pub(super) fn keeper(&self, name: &Name, owner: OwnerId) -> Option<Arc<Client>> {
        self.kept().get(&(name.clone(), owner)).cloned()
    }

    /// Forgets the session keeping `owner`'s baton of `name`; `true` when
    /// there was one. Dropped, a session that still held the baton gives it
    /// up as it closes.
    pub(super) fn forget(&self, name: &Name, owner: OwnerId) -> Option<Arc<Client>> {
        self.kept().remove(&(name.clone(), owner))
    }

    /// After a release that let go of the baton on `client`: keeps the
    /// session for the next wait.
    pub(super) fn reuse(&self, client: Arc<Client>) {
        if let Ok(client) = Arc::try_unwrap(client) {
            self.sessions.put_back(client);
        }
    }

    /// Waits for the lock of `req` on `backend` (the first try already
    /// failed) until `deadline`. Cancellation: dropping the future cancels
    /// and closes its session, which takes it out of the line or gives the
    /// baton up.
    pub(super) async fn wait(
        &self,
        backend: &LeaseBackend,
        req: &Request<'_>,
        deadline: Option<Instant>,
    ) -> Result<Option<Grant>> {
        let name = req.name.as_str();
        let mut session: Option<Waiting> = None;
        let mut baton = false;
        let mut poll = Backoff::new(POLL_MIN, POLL_MAX);
        let mut outage = Backoff::new(OUTAGE_MIN, OUTAGE_MAX);
        loop {
            let started = Instant::now();
            // The baton's holder tries on its own session: there the baton
            // counts as its own, and a free row goes to it.
            let attempt = match session.as_ref().filter(|_| baton) {
                Some(waiting) => backend.attempt_with_baton(req, waiting.client()).await,
                None => backend.attempt(req).await,
            };
            let expires_in = match attempt {
                Ok(Attempt::Granted { fence }) => {
                    if let Some(waiting) = session.take() {
                        let client = waiting.take();
                        if baton {
                            self.kept()
                                .insert((req.name.clone(), req.owner), Arc::new(client));
                        } else {
                            self.sessions.put_back(client);
                        }
                    }
                    return Ok(Some(Grant { fence, started }));
                }
                Ok(Attempt::Held { expires_in }) => {
                    outage = Backoff::new(OUTAGE_MIN, OUTAGE_MAX);
                    expires_in
                }
                // The server went away while we waited (or ended a session
                // we kept idle too long): waited out, on a new session (the
                // baton went with the old one).
                Err(e @ Error::Unavailable { .. }) => {
                    tracing::warn!(name, error = %e, "store unavailable while waiting; retrying");
                    session = None;
                    baton = false;
                    if !sleep_within(outage.next_delay(), deadline).await {
                        return Ok(None);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                self.give_up(session, baton);
                return Ok(None);
            }
            if baton {
                // First in line: the row, polled, and at the holder's expiry.
                let mut pause = poll.next_delay();
                if let Some(left) = expires_in {
                    pause = pause.min(left + EXPIRY_MARGIN);
                }
                if !sleep_within(pause, deadline).await {
                    self.give_up(session, baton);
                    return Ok(None);
                }
                continue;
            }
            if session.is_none() && self.enabled {
                // No session to spare: poll.
                session = self.sessions.take().await.ok().map(Waiting::new);
            }
            let Some(waiting) = session.as_ref() else {
                if !sleep_within(poll.next_delay(), deadline).await {
                    return Ok(None);
                }
                continue;
            };
            let bound = deadline.map_or(WAIT_CAP, |d| {
                d.saturating_duration_since(Instant::now()).min(WAIT_CAP)
            });
            let asked = self.ask(waiting.client(), name, bound);
            match tokio::time::timeout(bound + ANSWER_MARGIN, asked).await {
                Ok(Ok(true)) => {
                    baton = true;
                    poll = Backoff::new(POLL_MIN, POLL_MAX);
                }
                // Not within the bound: look at the row again.
                Ok(Ok(false)) => {}
                // A session that died (an idle one, or the server), or a
                // server that stopped answering: a new one next time.
                Ok(Err(_)) | Err(_) => session = None,
            }
        }
    }

    /// Waits up to `bound` for the baton of `name` on `client`; `true` when
    /// it has it.
    async fn ask(&self, client: &Client, name: &str, bound: Duration) -> Result<bool> {
        let (timeout, idle) = (setting(bound), setting(BATON_IDLE));
        let asked = client
            .query_typed(
                &self.ask,
                &[
                    (&name, Type::TEXT),
                    (&timeout, Type::TEXT),
                    (&idle, Type::TEXT),
                ],
            )
            .await;
        match asked {
            Ok(_) => Ok(true),
            // 55P03: lock_timeout; 57014: a statement_timeout of the server's.
            Err(e)
                if e.code()
                    .is_some_and(|c| matches!(c.code(), "55P03" | "57014")) =>
            {
                Ok(false)
            }
            Err(e) => Err(super::conn::pg_error(self.sessions.address(), &e)),
        }
    }

    /// A wait given up at its deadline: a session that only waited is kept
    /// for the next one; one holding the baton is closed, which passes it.
    fn give_up(&self, session: Option<Waiting>, baton: bool) {
        if let Some(waiting) = session.filter(|_| !baton) {
            self.sessions.put_back(waiting.take());
        }
    }
}
