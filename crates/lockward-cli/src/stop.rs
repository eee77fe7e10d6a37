//! A request to stop (SIGINT or SIGTERM) for the commands that run until
//! told to stop: `cron` and `elect`.
//!
//! Tokio keeps a signal's handler installed for the life of the process, so
//! once CMD has run once under [`crate::run::run_under`] (which forwards
//! signals to CMD), a SIGTERM that arrives between runs would otherwise be
//! swallowed and lockward would never stop. These commands listen from
//! their first moment instead: between runs a request ends them at once,
//! during a run it is forwarded to CMD and honoured when CMD has ended and
//! its outcome is recorded.

use std::task::{Context, Waker};

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Listens for SIGINT and SIGTERM from the moment it is installed.
pub struct StopRequest {
    int: Signal,
    term: Signal,
}

impl StopRequest {
    /// Starts listening; `None` when the handlers cannot be installed.
    pub fn install() -> Option<StopRequest> {
        Some(StopRequest {
            int: signal(SignalKind::interrupt()).ok()?,
            term: signal(SignalKind::terminate()).ok()?,
        })
    }

    /// Waits for a request and returns the signal's name.
    pub async fn requested(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
        }
    }

    /// A request that arrived since the last look, without waiting (one that
    /// came while CMD ran and was forwarded to it).
    pub fn arrived(&mut self) -> Option<&'static str> {
        let mut cx = Context::from_waker(Waker::noop());
        if self.int.poll_recv(&mut cx).is_ready() {
            return Some("SIGINT");
        }
        if self.term.poll_recv(&mut cx).is_ready() {
            return Some("SIGTERM");
        }
        None
    }
}
