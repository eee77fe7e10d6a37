//! The Redlock quorum fence: N masters, clients that take a name on a
//! majority of them in two rounds, masters that restart without their keys
//! and counters. Mirrors `crates/lockward/src/backend/redlock/mutex.rs`
//! with its scripts `lua/redlock_grant.lua` (round one: `SET NX PX` on
//! the master and its reading `max(counter, TIME)`) and
//! `lua/redlock_raise.lua` (round two: the counter raised to the token).
//!
//! A client's token is the largest reading of the masters that granted it,
//! plus one, once a majority did; it then raises each of their counters to
//! the token, and holds when a majority accepted within the validity
//! (`backend/redlock/quorum.rs`). The masters' clocks are apart by a
//! bounded skew, each kept across a restart, and a round takes at least a
//! tick. Promises: tokens of quorum grants only grow, across restarts too
//! (a restarted master reads its clock) as long as a restart takes longer
//! than the clocks are apart; and while no master has restarted, two clients
//! never both hold a majority within their validity. Broken variants:
//! readings without the clock (a restarted master reads 0), a token from
//! the first reading instead of the largest (a slow master's), and a
//! restart quicker than the clocks are apart.

use stateright::{Model, Property};

/// How a client turns its readings into a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Token {
    /// What lockward does: the largest reading of the majority, each
    /// `max(counter, clock)`, plus one.
    LargestWithClock,
    /// The largest reading, each the counter alone (broken: a master
    /// restarted without persistence reads 0).
    LargestWithoutClock,
    /// The first master's reading (broken: the largest lives elsewhere).
    FirstReading,
}

/// The model's parameters.
#[derive(Clone, Debug)]
pub struct Redlock {
    /// How a token is made.
    pub token: Token,
    /// How many masters.
    pub masters: usize,
    /// How many clients.
    pub clients: usize,
    /// The lease, ticks.
    pub ttl: u64,
    /// The last tick explored.
    pub horizon: u64,
    /// How many master restarts a run may have.
    pub restarts: u32,
    /// How many times each client may try.
    pub tries: u32,
    /// How far the masters' clocks are apart: the first runs `skew` ticks
    /// ahead of the true time, the last `skew` behind, the rest between.
    /// A master keeps its clock across a restart.
    pub skew: i64,
    /// How long (ticks) a master's restart takes: the rule holds when it is
    /// longer than the fastest clock is ahead of the others of a majority,
    /// as a restart that takes seconds is against clocks milliseconds
    /// apart.
    pub restart_gap: u64,
}

/// One master: who holds the name there (and until when), its counter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Master {
    /// The holder and the tick its key expires.
    pub holder: Option<(usize, u64)>,
    /// The name's fence counter on this master.
    pub counter: u64,
}

/// Where a client is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    /// Not trying (again, while it has tries left).
    Idle {
        /// Tries used.
        tries: u32,
    },
    /// Round two: the token, the masters to raise, and when the validity
    /// ends.
    Raising {
        /// Tries used.
        tries: u32,
        /// The token.
        token: u64,
        /// The masters that granted, to raise.
        raise: Vec<usize>,
        /// The tick the validity ends.
        until: u64,
    },
    /// Granted: a majority accepted the token within the validity.
    Held {
        /// Tries used.
        tries: u32,
        /// The tick the validity ends.
        until: u64,
    },
}

/// Where a run is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The true time (every master's clock: `EPOCH` + it).
    pub now: u64,
    /// The masters.
    pub masters: Vec<Master>,
    /// The clients.
    pub clients: Vec<Client>,
    /// The highest token of a quorum grant so far.
    pub highest: u64,
    /// A quorum grant's token was at or below an earlier one.
    pub repeated: bool,
    /// Two clients held within their validity at once.
    pub overlapped: bool,
    /// Restarts so far.
    pub restarts: u32,
    /// Quorum grants so far.
    pub grants: u32,
    /// When the last quorum grant was: a round takes round trips, far
    /// more than a tick (a µs), so at most one grant a tick.
    pub granted_at: Option<u64>,
}

/// What can happen next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Client `c` asks every master (round one, sent to all at once); the
    /// masters in `reached` (a bit per master) answer in time. With a
    /// majority of grants it has its token, else it lets go.
    Ask(usize, u32),
    /// Client `c` raises the counters of the masters that granted it
    /// (round two, sent to all at once): granted when a majority accepted
    /// within the validity, else it lets go.
    Raise(usize),
    /// Client `c` releases everywhere.
    Release(usize),
    /// Master `m` restarts without its keys and counter
    /// ([`Redlock::restart_gap`] ticks pass).
    Restart(usize),
    /// Time passes.
    Tick,
}

/// The base of the masters' clock.
const EPOCH: u64 = 100;

impl Redlock {
    /// The bounds the tests check, and the command line's: 3 masters with
    /// clocks 1 tick ahead, on time and 1 behind, 2 clients with 2 tries
    /// each, a lease of 2 ticks, 7 ticks, 1 restart taking 2 ticks (the
    /// fastest clock is 1 ahead of the rest of any majority).
    pub fn checked(token: Token) -> Redlock {
        Redlock {
            token,
            masters: 3,
            clients: 2,
            ttl: 2,
            horizon: 7,
            restarts: 1,
            tries: 2,
            skew: 1,
            restart_gap: 2,
        }
    }

    fn quorum(&self) -> usize {
        self.masters / 2 + 1
    }

    /// Master `m`'s clock offset from the true time.
    fn offset(&self, m: usize) -> i64 {
        let last = self.masters.saturating_sub(1).max(1) as i64;
        self.skew - 2 * self.skew * m as i64 / last
    }

    fn reading(&self, state: &State, m: usize) -> u64 {
        let counter = state.masters[m].counter;
        let clock = (EPOCH + state.now).saturating_add_signed(self.offset(m));
        match self.token {
            Token::LargestWithoutClock => counter,
            _ => counter.max(clock),
        }
    }

    /// Clears client `c`'s keys on every master.
    fn let_go(state: &mut State, c: usize) {
        for master in &mut state.masters {
            if master.holder.is_some_and(|(h, _)| h == c) {
                master.holder = None;
            }
        }
    }
}

impl Model for Redlock {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            masters: vec![
                Master {
                    holder: None,
                    counter: 0,
                };
                self.masters
            ],
            clients: vec![Client::Idle { tries: 0 }; self.clients],
            highest: 0,
            repeated: false,
            overlapped: false,
            restarts: 0,
            grants: 0,
            granted_at: None,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.repeated || state.overlapped {
            return;
        }
        for (c, client) in state.clients.iter().enumerate() {
            match client {
                Client::Idle { tries }
                    if *tries < self.tries && state.granted_at != Some(state.now) =>
                {
                    actions.extend((1..1u32 << self.masters).map(|reached| Action::Ask(c, reached)))
                }
                Client::Idle { .. } => {}
                Client::Raising { .. } => actions.push(Action::Raise(c)),
                Client::Held { .. } => actions.push(Action::Release(c)),
            }
        }
        if state.restarts < self.restarts && state.now + self.restart_gap <= self.horizon {
            for m in 0..self.masters {
                actions.push(Action::Restart(m));
            }
        }
        if state.now < self.horizon {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        match action {
            Action::Ask(c, reached) => {
                let Client::Idle { tries } = state.clients[c] else {
                    return None;
                };
                let mut readings = Vec::new();
                for m in (0..self.masters).filter(|m| reached & (1 << m) != 0) {
                    let reading = self.reading(state, m);
                    let master = &mut next.masters[m];
                    if master
                        .holder
                        .is_none_or(|(_, expires)| expires <= state.now)
                    {
                        master.holder = Some((c, state.now + self.ttl));
                        readings.push((m, reading));
                    }
                }
                if readings.len() < self.quorum() {
                    Redlock::let_go(&mut next, c);
                    next.clients[c] = Client::Idle { tries: tries + 1 };
                    return Some(next);
                }
                let reading = match self.token {
                    Token::FirstReading => readings[0].1,
                    _ => readings.iter().map(|(_, r)| *r).max().unwrap_or(0),
                };
                next.clients[c] = Client::Raising {
                    tries: tries + 1,
                    token: reading + 1,
                    raise: readings.iter().map(|(m, _)| *m).collect(),
                    // The validity counts from the try's start.
                    until: state.now + self.ttl,
                };
            }
            Action::Raise(c) => {
                let Client::Raising {
                    tries,
                    token,
                    ref raise,
                    until,
                } = state.clients[c]
                else {
                    return None;
                };
                // Raised only where the client still holds it.
                let mut accepted = 0;
                for m in raise {
                    let master = &mut next.masters[*m];
                    if master
                        .holder
                        .is_some_and(|(h, expires)| h == c && expires > state.now)
                    {
                        master.counter = master.counter.max(token);
                        accepted += 1;
                    }
                }
                if accepted < self.quorum() || until <= state.now {
                    Redlock::let_go(&mut next, c);
                    next.clients[c] = Client::Idle { tries };
                    return Some(next);
                }
                next.repeated |= token <= state.highest;
                next.highest = next.highest.max(token);
                next.grants += 1;
                next.granted_at = Some(state.now);
                // Another client holding within its validity now is an
                // overlap, while no master lost its keys.
                let others = state.clients.iter().enumerate().any(|(o, other)| {
                    o != c && matches!(other, Client::Held { until, .. } if *until > state.now)
                });
                next.overlapped |= others && state.restarts == 0;
                next.clients[c] = Client::Held { tries, until };
            }
            Action::Release(c) => {
                let Client::Held { tries, .. } = state.clients[c] else {
                    return None;
                };
                Redlock::let_go(&mut next, c);
                next.clients[c] = Client::Idle { tries };
            }
            Action::Restart(m) => {
                next.masters[m] = Master {
                    holder: None,
                    counter: 0,
                };
                next.restarts += 1;
                next.now += self.restart_gap;
            }
            Action::Tick => next.now += 1,
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(TOKENS_GROW, |_, s: &State| !s.repeated),
            Property::always(NO_OVERLAP, |_, s: &State| !s.overlapped),
            Property::sometimes(GRANTED_AFTER_RESTART, |_, s: &State| {
                s.restarts > 0 && s.grants >= 2
            }),
        ]
    }
}

/// Every quorum grant's token exceeds every earlier one's.
pub const TOKENS_GROW: &str = "every quorum grant's token exceeds every earlier one's";

/// While no master restarted, no two clients hold within their validity.
pub const NO_OVERLAP: &str = "no two clients hold a majority within their validity";

/// The model reaches grants on both sides of a restart.
pub const GRANTED_AFTER_RESTART: &str = "a master restarted and the name was granted twice";
