//! Fences across lost writes: a primary that grants, a copy of it that
//! lags (a replica, a snapshot), failovers and restores that bring the
//! copy back as the primary, and server clocks apart by a bounded skew.
//! Mirrors the fence rule of `crates/lockward/src/backend/redis/lua/next_fence.lua`
//! (PostgreSQL's `CLOCK_FENCE` and MySQL's `NEXT_FENCE` are the same rule
//! in SQL), documented in docs/fences.md.
//!
//! Time is counted in ticks of the servers' clock (µs in the code). A name
//! is granted at most once a tick. A failover or a restore takes
//! [`LostWrites::gap`] ticks, and the server that comes back may have its
//! clock set anywhere within [`LostWrites::skew`] of the true time. The
//! rule holds when the gap is longer than the two clocks can be apart
//! (`gap > 2 * skew`); with a shorter gap, or with a plain counter
//! ([`Rule::Incr`]), the checker finds a fence granted twice.

use stateright::{Model, Property};

/// How a grant's fence is drawn from the stored counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// `max(counter + 1, the server's clock)`: what lockward does.
    Hybrid,
    /// `counter + 1`: a plain `INCR` or `nextval`, the broken variant.
    Incr,
}

/// The model's parameters: the rule and its bounds.
#[derive(Clone, Debug)]
pub struct LostWrites {
    /// How fences are drawn.
    pub rule: Rule,
    /// How far (ticks) a server's clock may be from the true time.
    pub skew: i64,
    /// How long (ticks) a failover or a restore takes, from the loss to the
    /// first grant it allows.
    pub gap: u64,
    /// The last tick explored.
    pub horizon: u64,
    /// How many losses (failovers, restores) a run may have.
    pub losses: u32,
}

/// One server: the counter it stores and its clock's offset from the true
/// time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Server {
    /// The fence counter (`P` + N + `:fence` on Redis).
    pub counter: u64,
    /// Its clock minus the true time, in ticks.
    pub offset: i64,
}

/// Where a run is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The true time.
    pub now: u64,
    /// When the last grant was (one a tick at most).
    pub granted_at: Option<u64>,
    /// The server that grants.
    pub primary: Server,
    /// Its replica: the counter as replication last brought it.
    pub replica: u64,
    /// The counter as the last snapshot saved it.
    pub snapshot: u64,
    /// The highest fence granted so far.
    pub highest: u64,
    /// A grant's fence was at or below one granted before it.
    pub repeated: bool,
    /// Losses so far.
    pub losses: u32,
    /// A loss forgot at least one grant (the case the rule is for).
    pub forgot: bool,
    /// The name was granted since the last loss.
    pub granted_since_loss: bool,
}

/// What can happen next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The primary grants the name (the acquire script's grant branch).
    Grant,
    /// Time passes.
    Tick,
    /// The replica receives everything the primary has.
    Replicate,
    /// The primary saves a snapshot.
    Snapshot,
    /// The primary dies and its replica is promoted, its clock `offset`
    /// from the true time.
    Promote {
        /// The promoted server's clock offset.
        offset: i64,
    },
    /// The primary restarts from its last snapshot, its clock `offset`
    /// from the true time.
    Restore {
        /// The restarted server's clock offset.
        offset: i64,
    },
}

/// The base of the true time, so that clocks behind it stay positive.
const EPOCH: u64 = 100;

impl LostWrites {
    /// The bounds the tests check, and the command line's: clocks within 2
    /// ticks of the true time, a loss taking 5 ticks, 20 ticks, 3 losses.
    pub fn checked(rule: Rule) -> LostWrites {
        LostWrites {
            rule,
            skew: 2,
            gap: 5,
            horizon: 20,
            losses: 3,
        }
    }

    /// The fence the primary grants in `state`.
    fn next_fence(&self, state: &State) -> u64 {
        let clock = (EPOCH + state.now).saturating_add_signed(state.primary.offset);
        match self.rule {
            Rule::Hybrid => (state.primary.counter + 1).max(clock),
            Rule::Incr => state.primary.counter + 1,
        }
    }

    fn offsets(&self) -> impl Iterator<Item = i64> {
        -self.skew..=self.skew
    }

    /// `state` after a loss that brings back `counter`, on a server whose
    /// clock is `offset` from the true time, `gap` ticks later.
    fn after_loss(&self, state: &State, counter: u64, offset: i64) -> State {
        let mut next = state.clone();
        next.forgot |= counter < state.primary.counter;
        next.primary = Server { counter, offset };
        // The copy made of the new primary has what it has.
        next.replica = counter;
        next.snapshot = counter;
        next.now += self.gap;
        next.losses += 1;
        next.granted_since_loss = false;
        next
    }
}

impl Model for LostWrites {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        self.offsets()
            .map(|offset| State {
                now: 0,
                granted_at: None,
                primary: Server { counter: 0, offset },
                replica: 0,
                snapshot: 0,
                highest: 0,
                repeated: false,
                losses: 0,
                forgot: false,
                granted_since_loss: false,
            })
            .collect()
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.repeated {
            return;
        }
        if state.granted_at != Some(state.now) {
            actions.push(Action::Grant);
        }
        if state.now < self.horizon {
            actions.push(Action::Tick);
        }
        if state.replica != state.primary.counter {
            actions.push(Action::Replicate);
        }
        if state.snapshot != state.primary.counter {
            actions.push(Action::Snapshot);
        }
        if state.losses < self.losses && state.now + self.gap <= self.horizon {
            for offset in self.offsets() {
                actions.push(Action::Promote { offset });
                actions.push(Action::Restore { offset });
            }
        }
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        match action {
            Action::Grant => {
                let fence = self.next_fence(state);
                next.repeated |= fence <= state.highest;
                next.highest = next.highest.max(fence);
                next.primary.counter = fence;
                next.granted_at = Some(state.now);
                next.granted_since_loss = true;
            }
            Action::Tick => next.now += 1,
            Action::Replicate => next.replica = state.primary.counter,
            Action::Snapshot => next.snapshot = state.primary.counter,
            Action::Promote { offset } => next = self.after_loss(state, state.replica, offset),
            Action::Restore { offset } => next = self.after_loss(state, state.snapshot, offset),
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(FENCES_GROW, |_, s: &State| !s.repeated),
            Property::sometimes(GRANTS_FORGOTTEN, |_, s: &State| {
                s.forgot && s.granted_since_loss
            }),
        ]
    }
}

/// The invariant: every grant's fence exceeds every fence granted before.
pub const FENCES_GROW: &str = "every fence exceeds every fence granted before it";

/// The case the rule is for, which the model must reach: a loss forgot
/// grants, and the name was granted after it.
pub const GRANTS_FORGOTTEN: &str = "a loss forgot grants and the name was granted again";
