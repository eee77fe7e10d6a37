//! The Redis grant with its line of waiters and pushed wake-ups. Mirrors
//! `crates/lockward/src/backend/redis/lua/acquire.lua` (grant when free
//! and the caller is first in line, else join or renew its place),
//! `release_holder.lua` and `line.lua` (a release tells the first in line;
//! lapsed places are dropped; a free lock kept for the first reminds it),
//! and `crates/lockward/src/backend/store_line.rs` (a waiter tries again
//! on its wake-up and at least every third of its place's lease).
//!
//! Clients want the lock once each; the checker chooses when each tries,
//! re-checks, releases or crashes, when time passes (leases and places
//! run out), and which wake-ups are lost. The promises: the first live
//! place in line is the next granted (FIFO), every fence exceeds the one
//! before, and no waiter waits forever while the lock comes free (checked
//! as: every path that ends has every client served or crashed, within a
//! horizon after which timers fire at once). Broken variants: a grant
//! that ignores the line ([`Rule::IgnoreTheLine`]), and waiters that wake
//! only on a pushed message ([`Rule::PushedOnly`]), whose lost wake-up
//! leaves a waiter behind a free lock.

use stateright::{Model, Property};

/// Which rules the server and the waiters follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// What lockward does.
    Lockward,
    /// The grant does not look at the line (broken: not FIFO).
    IgnoreTheLine,
    /// Waiters re-check only when told (broken: a lost wake-up strands one).
    PushedOnly,
}

/// The model's parameters.
#[derive(Clone, Debug)]
pub struct RedisLine {
    /// The rules.
    pub rule: Rule,
    /// How many clients want the lock.
    pub clients: usize,
    /// A holder's lease, ticks.
    pub ttl: u8,
    /// A place's lease in line, ticks (a waiter re-checks within it).
    pub place: u8,
    /// When time stops: from then on every timer has fired.
    pub horizon: u8,
    /// How many clients may crash in one run.
    pub crashes: u8,
}

impl RedisLine {
    /// The bounds the tests check, and the command line's: three clients,
    /// a lease of 2 ticks and a place of 2, a horizon of 6 ticks, one
    /// crash.
    pub fn checked(rule: Rule) -> RedisLine {
        RedisLine {
            rule,
            clients: 3,
            ttl: 2,
            place: 2,
            horizon: 6,
            crashes: 1,
        }
    }
}

/// Where one client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    /// It wants the lock and has not asked yet.
    Wanting,
    /// In line; it re-checks when told, or from tick `recheck` on.
    Waiting {
        /// When its timer fires.
        recheck: u8,
    },
    /// It holds the lock with `fence`.
    Holding {
        /// The grant's fence.
        fence: u8,
    },
    /// It held the lock and released it.
    Served,
    /// It crashed (a waiter's place lapses, a holder's lease runs out).
    Crashed,
}

/// The server and the clients.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The server's clock.
    pub now: u8,
    /// The lock key: its holder and when it expires.
    pub holder: Option<(usize, u8)>,
    /// The fence counter.
    pub counter: u8,
    /// The line: owners in the order they joined, with their place's expiry.
    pub line: Vec<(usize, u8)>,
    /// Each client's state.
    pub clients: Vec<Client>,
    /// A turn message on its way to each client.
    pub told: Vec<bool>,
    /// A grant went to someone while another's live place was first.
    pub out_of_turn: bool,
    /// A grant's fence was not above the one before.
    pub fence_went_back: bool,
    /// How many more clients may crash.
    pub crashes_left: u8,
}

/// What the checker chooses next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Client `c` asks: the acquire script, joining the line.
    Ask(usize),
    /// Client `c` looks again (told, or its timer fired).
    Recheck(usize),
    /// Client `c` releases.
    Release(usize),
    /// Client `c` crashes.
    Crash(usize),
    /// The message to client `c` is lost.
    Lose(usize),
    /// A tick passes.
    Tick,
    /// Past the horizon: the leases and places of crashed clients run out.
    RunOut,
}

impl RedisLine {
    /// The first live place in line, after the lapsed ones are dropped.
    fn first_in_line(&self, state: &mut State) -> Option<usize> {
        let now = state.now;
        state.line.retain(|(_, expires)| *expires > now);
        state.line.first().map(|(c, _)| *c)
    }

    /// One run of the acquire script for client `c`.
    fn acquire(&self, state: &mut State, c: usize) {
        let first = self.first_in_line(state);
        let free = state.holder.is_none_or(|(_, expires)| expires <= state.now);
        let my_turn = first.is_none() || first == Some(c) || self.rule == Rule::IgnoreTheLine;
        if free && my_turn {
            if first.is_some_and(|f| f != c) {
                state.out_of_turn = true;
            }
            let fence = state.counter + 1;
            if fence <= state.counter {
                state.fence_went_back = true;
            }
            state.counter = fence;
            state.holder = Some((c, state.now + self.ttl));
            state.line.retain(|(owner, _)| *owner != c);
            state.clients[c] = Client::Holding { fence };
            state.told[c] = false;
            return;
        }
        // Joins the line, or renews its place.
        let place = state.now + self.place;
        match state.line.iter_mut().find(|(owner, _)| *owner == c) {
            Some(entry) => entry.1 = place,
            None => state.line.push((c, place)),
        }
        // Free, but kept for the first in line: it is reminded.
        if free {
            if let Some(f) = first {
                state.told[f] = true;
            }
        }
        let recheck = match self.rule {
            Rule::PushedOnly => u8::MAX,
            _ => state.now + self.place / 2,
        };
        state.clients[c] = Client::Waiting { recheck };
    }
}

impl Model for RedisLine {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            holder: None,
            counter: 0,
            line: Vec::new(),
            clients: vec![Client::Wanting; self.clients],
            told: vec![false; self.clients],
            out_of_turn: false,
            fence_went_back: false,
            crashes_left: self.crashes,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let stopped = state.now >= self.horizon;
        for (c, client) in state.clients.iter().enumerate() {
            match client {
                Client::Wanting => actions.push(Action::Ask(c)),
                Client::Waiting { recheck } => {
                    // Past the horizon every timer has fired.
                    let timer = *recheck <= state.now || (stopped && self.rule != Rule::PushedOnly);
                    if state.told[c] || timer {
                        actions.push(Action::Recheck(c));
                    }
                    if state.crashes_left > 0 {
                        actions.push(Action::Crash(c));
                    }
                }
                Client::Holding { .. } => {
                    actions.push(Action::Release(c));
                    if state.crashes_left > 0 {
                        actions.push(Action::Crash(c));
                    }
                }
                Client::Served | Client::Crashed => {}
            }
            if state.told[c] {
                actions.push(Action::Lose(c));
            }
        }
        if !stopped {
            actions.push(Action::Tick);
        } else {
            let crashed = |c: usize| state.clients[c] == Client::Crashed;
            let left = state
                .holder
                .is_some_and(|(h, expires)| crashed(h) && expires > state.now)
                || state
                    .line
                    .iter()
                    .any(|(c, expires)| crashed(*c) && *expires > state.now);
            if left {
                actions.push(Action::RunOut);
            }
        }
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        match action {
            Action::Ask(c) => self.acquire(&mut next, c),
            Action::Recheck(c) => {
                next.told[c] = false;
                self.acquire(&mut next, c);
            }
            Action::Release(c) => {
                // Owner-checked: a holder whose lease ran out releases nothing.
                if next.holder.is_some_and(|(h, _)| h == c) {
                    next.holder = None;
                    if let Some(f) = self.first_in_line(&mut next) {
                        next.told[f] = true;
                    }
                }
                next.clients[c] = Client::Served;
            }
            Action::Crash(c) => {
                next.clients[c] = Client::Crashed;
                next.told[c] = false;
                next.crashes_left -= 1;
            }
            Action::Lose(c) => next.told[c] = false,
            Action::Tick => next.now += 1,
            Action::RunOut => next.now += self.ttl + self.place,
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(FIFO, |_, s: &State| !s.out_of_turn),
            Property::always(FENCES_GROW, |_, s: &State| !s.fence_went_back),
            Property::eventually(EVERY_WAITER_SERVED, |_, s: &State| {
                s.clients
                    .iter()
                    .all(|c| matches!(c, Client::Served | Client::Crashed))
            }),
            Property::sometimes(HANDED_OVER, |_, s: &State| {
                s.clients.iter().filter(|c| **c == Client::Served).count() >= 2
            }),
        ]
    }
}

/// The first live place in line is the next granted.
pub const FIFO: &str = "the first live place in line is granted next";

/// Every grant's fence exceeds the one before.
pub const FENCES_GROW: &str = "every fence exceeds the one before";

/// No waiter is left behind: every path ends with every client served or
/// crashed.
pub const EVERY_WAITER_SERVED: &str = "no waiter waits forever";

/// The lock passes from one holder to a waiter.
pub const HANDED_OVER: &str = "the lock is handed over";
