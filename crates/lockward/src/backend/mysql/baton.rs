//! Lease mode's waiting: a baton, one named lock per name (`GET_LOCK`),
//! that the server hands from waiter to waiter in the order they asked.
//!
//! The lease row stays the lock (server clock, fence); the baton says
//! whose turn it is. A free lock nobody waits for is taken without it. A
//! waiter asks for the baton on a session of its own and waits for it in
//! the server; the one that has it tries the row on that session, where a
//! free row is its alone (the taking statement asks that the baton be free
//! or this session's: see [`super::mutex`]), polling (1 → 50 ms, and at
//! the holder's expiry) until it is granted, and keeps the baton while it
//! holds the lock. Its release lets go of the baton after the row, so the
//! server wakes the next waiter, whose first look finds the row free and
//! kept for it: under contention handoffs are pushed and go in the order
//! the waiters asked, a holder that releases and asks again queues behind
//! them, and only one waiter per name ever polls.
//!
//! A waiter waits for the baton no longer than the holder's lease could
//! last; an expired row whose holder is stuck (paused, cut off) with the
//! baton goes to the next caller at once, and a free row whose baton a
//! stuck waiter keeps goes to anyone after `BARGE_AFTER`: the server's
//! clock still decides when a lock can be taken over.
//! A session that ends (a crash) gives the baton up with it. A waiter
//! costs one session while it waits; when none can be opened (the server's
//! `max_connections`), it polls the row as a store that pushes nothing.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use mysql_async::Conn;

use super::sessions::{Sessions, Waiting};
use crate::backend::recheck::{
    sleep_within, wait_out_outage, Backoff, EXPIRY_MARGIN, OUTAGE_MAX, OUTAGE_MIN, POLL_MAX,
    POLL_MIN,
};
use crate::backend::sessions::HeldSessions;
use crate::backend::{Attempt, Grant, Request};
use crate::error::{Error, Result};
use crate::name::Name;
use crate::owner::OwnerId;

/// How long a waiter waits for the baton when the row says nothing of the
/// holder's lease (it was just released): it looks again after.
const BLIND_WAIT: Duration = Duration::from_secs(1);

/// What a baton needs of its store: one try at the row, on the baton
/// holder's session when there is one (there the baton counts as the
/// caller's, and a free row goes to it).
#[async_trait]
pub(super) trait TryRow: Sync {
    /// One try at the row of `req`, on the pool or on `session`.
    async fn try_row(&self, req: &Request<'_>, session: Option<&mut Conn>) -> Result<Attempt>;
}

/// The batons of one store: its sessions, and the batons its holders keep.
pub(super) struct Batons {
    sessions: Sessions,
    table: String,
    kept: HeldSessions<Conn>,
}

impl Batons {
    pub(super) fn new(sessions: Sessions, table: &str) -> Batons {
        Batons {
            sessions,
            table: table.to_string(),
            kept: HeldSessions::default(),
        }
    }

    /// `TABLE#baton:NAME`, which the server hashes into the baton's key
    /// (never a named-mode key, which is `TABLE:NAME`).
    pub(super) fn key(&self, name: &Name) -> Vec<u8> {
        format!("{}#baton:{}", self.table, name.as_str()).into_bytes()
    }

    /// Waits for the lock of `req` on `backend` (the first try already
    /// failed) until `deadline`. Dropping the future ends its session,
    /// which gives the baton up.
    pub(super) async fn wait(
        &self,
        backend: &impl TryRow,
        req: &Request<'_>,
        deadline: Option<Instant>,
    ) -> Result<Option<Grant>> {
        let key = self.key(req.name);
        let mut session: Option<Waiting> = None;
        let mut baton = false;
        let mut poll = Backoff::new(POLL_MIN, POLL_MAX);
        let mut outage = Backoff::new(OUTAGE_MIN, OUTAGE_MAX);
        loop {
            let started = Instant::now();
            // The baton's holder tries on its own session: there the baton
            // counts as its own, and a free row goes to it.
            let on = session.as_mut().filter(|_| baton).map(Waiting::conn);
            let expires_in = match backend.try_row(req, on).await {
                Ok(Attempt::Granted { fence }) => {
                    self.settle(session, baton, req);
                    return Ok(Some(Grant { fence, started }));
                }
                Ok(Attempt::Held { expires_in }) => {
                    outage = Backoff::new(OUTAGE_MIN, OUTAGE_MAX);
                    expires_in
                }
                // The server went away while we waited: waited out, on a
                // new session (the baton went with the old one).
                Err(e @ Error::Unavailable { .. }) => {
                    session = None;
                    baton = false;
                    if !wait_out_outage(req.name, &e, &mut outage, deadline).await {
                        return Ok(None);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            if baton {
                // First in line: the row, polled, and at the holder's expiry.
                let mut pause = poll.next_delay();
                if let Some(left) = expires_in {
                    pause = pause.min(left + EXPIRY_MARGIN);
                }
                if !sleep_within(pause, deadline).await {
                    return Ok(None);
                }
                continue;
            }
            if session.is_none() {
                match self.sessions.take().await {
                    Ok((conn, _)) => session = Some(self.sessions.waiting(conn)),
                    // No session to spare: poll.
                    Err(_) => {
                        if !sleep_within(poll.next_delay(), deadline).await {
                            return Ok(None);
                        }
                        continue;
                    }
                }
            }
            let waiting = session.as_mut().expect("just set");
            // In whole seconds (what every server takes), as long as the
            // holder's lease could last; the exact deadline is kept here.
            let bound = expires_in.unwrap_or(BLIND_WAIT) + EXPIRY_MARGIN;
            let wait_s = bound.as_secs_f64().ceil().max(1.0) as u64;
            let asked = self
                .sessions
                .get_lock_until(waiting, &key, wait_s, deadline);
            let Some(got) = asked.await else {
                return Ok(None);
            };
            match got {
                Ok(true) => {
                    baton = true;
                    poll = Backoff::new(POLL_MIN, POLL_MAX);
                }
                // Not within the holder's lease: look at the row again.
                Ok(false) => {}
                // A session that died (an idle one, or the server): a new
                // one next time.
                Err(_) => session = None,
            }
        }
    }

    /// After a grant: the waiting session keeps the baton for the holder,
    /// or, without it, goes back idle.
    fn settle(&self, session: Option<Waiting>, baton: bool, req: &Request<'_>) {
        let Some(conn) = session.map(Waiting::take) else {
            return;
        };
        if baton {
            self.kept.insert(req.name, req.owner, conn);
        } else {
            self.sessions.put_back(conn);
        }
    }

    /// After the row of `name` was released by `owner`: lets go of the
    /// baton it kept, if any, which wakes the next waiter. Cancellation:
    /// dropped midway, the session ends, which lets go of it too.
    pub(super) async fn pass(&self, name: &Name, owner: OwnerId) {
        let Some(mut conn) = self.kept.remove(name, owner) else {
            return;
        };
        if let Ok(true) = self.sessions.release_lock(&mut conn, &self.key(name)).await {
            self.sessions.put_back(conn);
        }
        // Otherwise the session is dropped, and the baton with it.
    }
}
