//! Lease mode's waiting: a baton per name, a session advisory lock that
//! the server's lock manager hands from waiter to waiter in the order they
//! asked, waking exactly one backend per handoff (no LISTEN, so the number
//! of listeners in the database, lockward's or another program's, costs
//! nothing).
//!
//! The lease row stays the lock (server clock, fence); the baton says
//! whose turn it is. A free lock nobody waits for is taken without it. A
//! waiter asks for the baton on a session of its own, and the statement
//! that waits for it in the server goes on to try the row once it has it:
//! there a free row is its alone (the taking statement asks that the baton
//! be free or this session's: see [`super::lease`]). A holder that took the
//! row without the baton (nobody waited then) is waited out by asking, in
//! its row, to be told of its release: that release alone sends a NOTIFY,
//! which the store's one listening connection hears; the baton's holder
//! also looks at the row at the holder's expiry, and polls if it cannot
//! listen. The waiter keeps the baton while it holds the lock, and its
//! release lets go of it in the same statement that frees the row, which
//! wakes the next waiter, whose statement takes the row: under contention
//! a handoff is one statement of each, pushed, in the order the waiters
//! asked, and a holder that releases and asks again queues behind them.
//!
//! A session that keeps a baton is ended by the server when it falls idle
//! for too long (`idle_session_timeout`, PostgreSQL 14 and later): a waiter
//! holding the baton looks at the row within [`BATON_IDLE`] (within
//! `TOLD_SAFETY_NET` when it is to be told), a holder renews on that
//! session, so only a stuck one (paused, cut off) falls idle, and the
//! server ends its session, which passes the baton on: at the holder's
//! lease's end, or soon after a waiter stopped. The server also checks a
//! waiting session's connection every `BATON_IDLE`, so a waiter that died
//! leaves the queue; one stopped or cut off in it is granted in its turn
//! and keeps the lock for its lease. A session that ends (a crash) gives
//! the baton up with it. A waiter costs one
//! session while it waits; when none can be opened (the server's
//! `max_connections`), or the server is older than 14, it polls the row as
//! a store that pushes nothing.
//!
//! Sessions, hence batons, do not survive a pooler in transaction mode
//! (PgBouncer): there the waiters would share server sessions. Connect
//! waiters directly, or through a session-mode pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::sessions::{Session, Sessions, Waiting};
use crate::backend::channel_waiters::Waiter;
use crate::backend::recheck::{
    sleep_within, wait_out_outage, Backoff, EXPIRY_MARGIN, OUTAGE_MAX, OUTAGE_MIN, POLL_MAX,
    POLL_MIN,
};
use crate::backend::sessions::HeldSessions;
use crate::backend::time::millis;
use crate::backend::{Attempt, Grant, Request, Wakeup};
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

/// A baton holder told of the release still looks at the row this often
/// (in case the notification was lost with a connection).
const TOLD_SAFETY_NET: Duration = Duration::from_secs(2);

/// How long past its `lock_timeout` a wait for the baton may go without an
/// answer before the server counts as gone.
const ANSWER_MARGIN: Duration = Duration::from_secs(2);

/// The baton's key, `hashtextextended('TABLE#baton:NAME', 0)`, in SQL over
/// the name in `$n` (never an advisory-mode key, which is `TABLE:NAME`).
pub(super) fn key_sql(table: &str, n: u8) -> String {
    format!("hashtextextended('{table}#baton:' || ${n}::text, 0)")
}

/// `value` as a setting in milliseconds, for `set_config` (whose
/// timeouts take 1 ms to `i32::MAX` ms, about 24 days).
pub(super) fn setting(value: Duration) -> String {
    millis(value).clamp(1, i64::from(i32::MAX)).to_string()
}

/// What a baton needs of its store's rows: the steps of a turn.
#[async_trait]
pub(super) trait BatonRow: Sync {
    /// One try at the row of `req`, on the shared connection.
    async fn attempt(&self, req: &Request<'_>) -> Result<Attempt>;

    /// One try at the row of `req` on `client`, the session holding the
    /// name's baton (where a free row is ours).
    async fn attempt_with_baton(&self, req: &Request<'_>, client: &Session) -> Result<Attempt>;

    /// Waits up to `bound` on `client` for the baton of `req`'s name, then
    /// tries the row, in one statement: `None` when the bound passed, else
    /// the try's answer and how long the server waited for the baton.
    async fn wait_then_attempt(
        &self,
        req: &Request<'_>,
        client: &Session,
        bound: Duration,
    ) -> Result<Option<(Attempt, Duration)>>;

    /// A wakeup at the release of the row of `name`, asked for in the row:
    /// `None` when it was no longer held, else the holder's time left.
    async fn tell_me_of_release(&self, name: &Name) -> Result<Option<(Waiter, Duration)>>;
}

/// The batons of one store: its sessions, and the batons its holders keep.
pub(super) struct Batons {
    sessions: Sessions,
    /// Whether the server ends idle sessions (PostgreSQL 14 and later);
    /// without that a stuck baton could stall its line, so waiters poll.
    enabled: bool,
    kept: HeldSessions<Arc<Session>>,
}

impl Batons {
    pub(super) fn new(sessions: Sessions, enabled: bool) -> Batons {
        Batons {
            sessions,
            enabled,
            kept: HeldSessions::default(),
        }
    }

    /// The session keeping the baton of `name` for its holder `owner`.
    pub(super) fn keeper(&self, name: &Name, owner: OwnerId) -> Option<Arc<Session>> {
        self.kept.get(name, owner)
    }

    /// Forgets the session keeping `owner`'s baton of `name`, and returns
    /// it. Dropped, a session that still held the baton gives it up as it
    /// closes.
    pub(super) fn forget(&self, name: &Name, owner: OwnerId) -> Option<Arc<Session>> {
        self.kept.remove(name, owner)
    }

    /// After a release that let go of the baton on `client`: keeps the
    /// session for the next wait.
    pub(super) fn reuse(&self, client: Arc<Session>) {
        if let Ok(client) = Arc::try_unwrap(client) {
            self.sessions.put_back(client);
        }
    }

    /// Waits for the lock of `req` on `backend` (the first try already
    /// failed) until `deadline`.
    ///
    /// Cancellation: dropping the future cancels and closes its session, which
    /// takes it out of the line or gives the baton up; a row its statement took
    /// at that very moment stays held until its lease ends, as a grant in
    /// flight does on any store.
    pub(super) async fn wait(
        &self,
        backend: &impl BatonRow,
        req: &Request<'_>,
        deadline: Option<Instant>,
    ) -> Result<Option<Grant>> {
        let mut session: Option<Waiting> = None;
        let mut baton = false;
        let mut poll = Backoff::new(POLL_MIN, POLL_MAX);
        let mut outage = Backoff::new(OUTAGE_MIN, OUTAGE_MAX);
        // The caller has just tried the row.
        let mut tried = true;
        let mut expires_in = None;
        // The baton holder's wakeup at the release of a holder without it.
        let mut told: Option<Waiter> = None;
        loop {
            if let Some(wakeup) = told.as_mut() {
                wakeup.mark_seen();
            }
            if !std::mem::take(&mut tried) {
                let started = Instant::now();
                // The baton's holder tries on its own session: there the
                // baton counts as its own, and a free row goes to it.
                let attempt = match session.as_ref().filter(|_| baton) {
                    Some(waiting) => backend.attempt_with_baton(req, waiting.client()).await,
                    None => backend.attempt(req).await,
                };
                match attempt {
                    Ok(Attempt::Granted { fence }) => {
                        self.settle(session, baton, req);
                        return Ok(Some(Grant { fence, started }));
                    }
                    Ok(Attempt::Held { expires_in: left }) => {
                        outage = Backoff::new(OUTAGE_MIN, OUTAGE_MAX);
                        expires_in = left;
                    }
                    // The server went away while we waited (or ended a
                    // session we kept idle too long): waited out, on a new
                    // session (the baton went with the old one).
                    Err(e @ Error::Unavailable { .. }) => {
                        session = None;
                        baton = false;
                        told = None;
                        if !wait_out_outage(req.name, &e, &mut outage, deadline).await {
                            return Ok(None);
                        }
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                self.give_up(session, baton);
                return Ok(None);
            }
            if baton {
                if told.is_none() {
                    // Told, it looks at the row less often: its session may
                    // idle that long (plus `BATON_IDLE`) before the server
                    // counts it as stuck.
                    let waiting = session.as_ref().expect("the baton's holder has a session");
                    let idle = format!(
                        "SET idle_session_timeout = {}",
                        setting(TOLD_SAFETY_NET + BATON_IDLE)
                    );
                    if waiting.client().batch_execute(&idle).await.is_err() {
                        session = None;
                        baton = false;
                        continue;
                    }
                    match backend.tell_me_of_release(req.name).await {
                        Ok(Some((wakeup, left))) => {
                            told = Some(wakeup);
                            expires_in = Some(left);
                        }
                        // Released meanwhile: look again at once.
                        Ok(None) => continue,
                        // Polled instead.
                        Err(_) => {}
                    }
                }
                if !self
                    .pause(&mut poll, told.as_mut(), expires_in, deadline)
                    .await
                {
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
            let sent = Instant::now();
            let turn = backend.wait_then_attempt(req, waiting.client(), bound);
            expires_in = match tokio::time::timeout(bound + ANSWER_MARGIN, turn).await {
                Ok(Ok(Some((Attempt::Granted { fence }, waited)))) => {
                    let client = session.take().expect("waited on it").take();
                    self.kept.insert(req.name, req.owner, Arc::new(client));
                    // The lease counts from the row's taking, after the
                    // wait; never later than the server's.
                    return Ok(Some(Grant {
                        fence,
                        started: sent + waited,
                    }));
                }
                Ok(Ok(Some((Attempt::Held { expires_in }, _)))) => expires_in,
                // Not within the bound: look at the row again.
                Ok(Ok(None)) => continue,
                // A session that died (an idle one, or the server), or a
                // server that stopped answering: a new one next time.
                Ok(Err(_)) | Err(_) => {
                    session = None;
                    if !sleep_within(outage.next_delay(), deadline).await {
                        return Ok(None);
                    }
                    continue;
                }
            };
            // Our turn, but the holder took the row without the baton: its
            // release, told (or polled), and its expiry, waited for above.
            baton = true;
            poll = Backoff::new(POLL_MIN, POLL_MAX);
        }
    }

    /// The baton holder's pause before it looks at the row again: until
    /// the release is told (at the latest after `TOLD_SAFETY_NET`), else
    /// the next of `poll`; cut at the holder's expiry. `false` when
    /// `deadline` came first.
    async fn pause(
        &self,
        poll: &mut Backoff,
        told: Option<&mut Waiter>,
        expires_in: Option<Duration>,
        deadline: Option<Instant>,
    ) -> bool {
        let mut pause = match told {
            Some(_) => TOLD_SAFETY_NET,
            None => poll.next_delay(),
        };
        if let Some(left) = expires_in {
            pause = pause.min(left + EXPIRY_MARGIN);
        }
        match told {
            Some(wakeup) => tokio::select! {
                _ = wakeup.changed() => true,
                slept = sleep_within(pause, deadline) => slept,
            },
            None => sleep_within(pause, deadline).await,
        }
    }

    /// After a grant: the waiting session keeps the baton for the holder,
    /// or, without it, goes back idle.
    fn settle(&self, session: Option<Waiting>, baton: bool, req: &Request<'_>) {
        let Some(client) = session.map(Waiting::take) else {
            return;
        };
        if baton {
            self.kept.insert(req.name, req.owner, Arc::new(client));
        } else {
            self.sessions.put_back(client);
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

#[cfg(test)]
mod tests {
    use super::setting;
    use std::time::Duration;

    #[test]
    fn settings_stay_within_what_the_server_takes() {
        assert_eq!(setting(Duration::from_millis(1500)), "1500");
        assert_eq!(setting(Duration::ZERO), "1");
        assert_eq!(setting(Duration::from_secs(30 * 24 * 3600)), "2147483647");
    }
}
