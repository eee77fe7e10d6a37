//! The lease's deadline across `lockward serve`: a client, the daemon and
//! the store, each with its own clock (rates off by a bounded amount), and
//! a delay on every message. Mirrors the deadline arithmetic of
//! `crates/lockward/src/lease.rs` (`delayed_deadline`: request start + TTL
//! − drift), `crates/lockward-serve/src/lease.rs` (the grant's `waited_ms`
//! and `remaining_ms`) and the Go client's `lease.go` (`sent + waited +
//! remaining`).
//!
//! The steps, in true time: the client sends the request (`sent`, on its
//! clock); the daemon receives it, then asks the store (the library's
//! request start); the store grants and times the TTL on its clock; the
//! daemon answers with how long it waited since receiving and how long is
//! left of its deadline; the client adds both to `sent`. Every delay and
//! every clock's error is chosen by the checker within its bounds. The
//! promise: the client's deadline never passes after the store's expiry.
//! Broken variants: the client counting from when it received the grant
//! ([`Deadline::FromReply`]), and a deadline without the drift
//! ([`Deadline::NoDrift`]).

use stateright::{Model, Property};

/// How the client's deadline is reckoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Deadline {
    /// What lockward does: from the request's start, less the drift.
    FromRequest,
    /// From the grant's arrival (the broken variant: it counts the
    /// request's time in the store twice).
    FromReply,
    /// From the request's start, without the drift allowance (broken).
    NoDrift,
}

/// The model's parameters.
#[derive(Clone, Debug)]
pub struct LeaseDeadline {
    /// How the client reckons its deadline.
    pub deadline: Deadline,
    /// The lease's TTL, in ticks.
    pub ttl: u64,
    /// The drift allowance taken off the TTL (lockward: TTL/100 + 2 ms).
    pub drift: u64,
    /// The longest delay of one message (or of the store's work), ticks.
    pub delay: u64,
    /// How far each clock may be off over the TTL, ticks (its rate error).
    pub skew: u64,
}

/// The steps of one acquisition, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    /// The client is about to send.
    Sending,
    /// The request is on its way to the daemon.
    ToDaemon,
    /// The daemon has it and is about to ask the store.
    Asking,
    /// The request is on its way to the store, and the store at work.
    ToStore,
    /// The store grants.
    Granting,
    /// The grant is on its way back to the daemon.
    ToDaemonBack,
    /// The daemon answered; the grant is on its way to the client.
    ToClient,
    /// The grant arrives at the client.
    Arriving,
    /// The client has its deadline.
    Held,
}

/// Where an acquisition is, in true time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The step reached.
    pub step: Step,
    /// The true time.
    pub now: u64,
    /// When the client sent.
    pub sent: u64,
    /// When the daemon received the request.
    pub received: u64,
    /// When the daemon's request to the store started (the library's
    /// request start).
    pub asked: u64,
    /// When the store's lease ends.
    pub expires: u64,
    /// What the daemon answered: how long it waited, and how long is left.
    pub answer: Option<(u64, u64)>,
    /// How far the daemon's clock is off over what it measures.
    pub daemon_error: i64,
    /// The client's deadline, once held.
    pub deadline: Option<u64>,
}

/// What the checker chooses next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The daemon's clock is off by `error` ticks over what it measures.
    DaemonClock {
        /// The error.
        error: i64,
    },
    /// The current step takes `ticks` (a message's delay, or work).
    Take {
        /// How long.
        ticks: u64,
    },
    /// The store grants, its clock off by `error` ticks over the TTL (fast:
    /// the lease ends early in true time).
    Grant {
        /// The error.
        error: i64,
    },
    /// The grant arrives; the client's clock is off by `error` ticks over
    /// what it adds.
    ClientClock {
        /// The error.
        error: i64,
    },
}

impl LeaseDeadline {
    /// The bounds the tests check, and the command line's: a TTL of 100
    /// ticks with lockward's drift (TTL/100 + 2), each clock off by up to
    /// 1 % of the TTL, every delay up to 3 ticks.
    pub fn checked(deadline: Deadline) -> LeaseDeadline {
        LeaseDeadline {
            deadline,
            ttl: 100,
            drift: 3,
            delay: 3,
            skew: 1,
        }
    }

    fn errors(&self) -> impl Iterator<Item = i64> {
        let skew = self.skew as i64;
        -skew..=skew
    }
}

impl Model for LeaseDeadline {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            step: Step::Sending,
            now: 0,
            sent: 0,
            received: 0,
            asked: 0,
            expires: 0,
            answer: None,
            daemon_error: 0,
            deadline: None,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let delays = (0..=self.delay).map(|ticks| Action::Take { ticks });
        match state.step {
            Step::Sending => {
                actions.extend(self.errors().map(|error| Action::DaemonClock { error }))
            }
            Step::ToDaemon | Step::Asking | Step::ToStore | Step::ToDaemonBack | Step::ToClient => {
                actions.extend(delays)
            }
            Step::Granting => actions.extend(self.errors().map(|error| Action::Grant { error })),
            Step::Arriving => {
                actions.extend(self.errors().map(|error| Action::ClientClock { error }))
            }
            Step::Held => {}
        }
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        match (state.step, action) {
            (Step::Sending, Action::DaemonClock { error }) => {
                next.daemon_error = error;
                next.sent = state.now;
                next.step = Step::ToDaemon;
            }
            (Step::ToDaemon, Action::Take { ticks }) => {
                next.now += ticks;
                next.received = next.now;
                next.step = Step::Asking;
            }
            (Step::Asking, Action::Take { ticks }) => {
                next.now += ticks;
                next.asked = next.now;
                next.step = Step::ToStore;
            }
            (Step::ToStore, Action::Take { ticks }) => {
                next.now += ticks;
                next.step = Step::Granting;
            }
            (Step::Granting, Action::Grant { error }) => {
                next.expires = (state.now + self.ttl).saturating_add_signed(-error);
                next.step = Step::ToDaemonBack;
            }
            (Step::ToDaemonBack, Action::Take { ticks }) => {
                // The daemon answers: `waited_ms` since it received the
                // request, `remaining_ms` of the library's deadline.
                next.now += ticks;
                let drift = match self.deadline {
                    Deadline::NoDrift => 0,
                    _ => self.drift,
                };
                let deadline = state.asked + self.ttl - drift;
                let remaining = deadline.saturating_sub(next.now);
                next.answer = Some((next.now - state.received, remaining));
                next.step = Step::ToClient;
            }
            (Step::ToClient, Action::Take { ticks }) => {
                next.now += ticks;
                next.step = Step::Arriving;
            }
            (Step::Arriving, Action::ClientClock { error }) => {
                let (waited, remaining) = state.answer?;
                // What the daemon measured is off by its clock's error;
                // what the client adds to `sent`, by its own.
                let measured = (waited + remaining).saturating_add_signed(state.daemon_error);
                let deadline = match self.deadline {
                    Deadline::FromReply => state.now + remaining,
                    _ => state.sent + measured,
                };
                next.deadline = Some(deadline.saturating_add_signed(error));
                next.step = Step::Held;
            }
            _ => return None,
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(DEADLINE_FIRST, |_, s: &State| {
                s.deadline.is_none_or(|deadline| deadline <= s.expires)
            }),
            Property::sometimes(HELD, |_, s: &State| s.step == Step::Held),
        ]
    }
}

/// The promise: the client's deadline comes no later than the store's
/// expiry.
pub const DEADLINE_FIRST: &str = "the client's deadline never passes after the store's expiry";

/// The model reaches a held lease.
pub const HELD: &str = "the client holds the lease";
