//! The database fence's claim against the old holder's open transactions,
//! on PostgreSQL under READ COMMITTED. Mirrors
//! `crates/lockward/src/fence/postgres/sql.rs`: `lockward.check_fence()`,
//! the statement-level trigger on every guarded table, takes a shared
//! advisory lock on the lock's name (held to the end of its transaction)
//! and reads the stored fence afresh; `lockward.claim()` takes that
//! advisory lock exclusively, which waits for every transaction that
//! checked, and raises the stored fence.
//!
//! The old holder (fence 1) runs transactions that each make a few
//! statements and commit; the new holder claims fence 2 once, at any
//! moment. The checker chooses every interleaving. The promise: no write
//! under the older fence commits after the newer claim committed, so
//! everything the old holder committed comes before the claim. Broken
//! variants: the shared lock let go at the statement's end instead of the
//! transaction's ([`Check::HeldForTheStatement`]), and a check that reads
//! the fence without the lock ([`Check::WithoutTheLock`]).

use stateright::{Model, Property};

/// How a statement's check holds what the claim waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Check {
    /// What lockward does: the shared lock until the transaction ends.
    HeldToTheCommit,
    /// The shared lock for the statement only (broken).
    HeldForTheStatement,
    /// No lock, only a read of the fence (broken).
    WithoutTheLock,
}

/// The model's parameters.
#[derive(Clone, Debug)]
pub struct FenceClaim {
    /// How the trigger's check holds the lock's name.
    pub check: Check,
    /// How many transactions the old holder runs.
    pub transactions: usize,
    /// The most statements each makes.
    pub statements: u8,
}

impl FenceClaim {
    /// The bounds the tests check, and the command line's: three
    /// transactions of up to three statements each.
    pub fn checked(check: Check) -> FenceClaim {
        FenceClaim {
            check,
            transactions: 3,
            statements: 3,
        }
    }
}

/// Where one of the old holder's transactions is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not begun.
    Idle,
    /// Begun; statements may follow.
    Open,
    /// Committed.
    Committed,
    /// Rolled back: a statement was refused.
    Refused,
}

/// One of the old holder's transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Txn {
    /// Where it is.
    pub phase: Phase,
    /// Statements made.
    pub statements: u8,
    /// Whether it holds the shared lock on the lock's name.
    pub shared: bool,
    /// Whether it wrote (a statement passed its check).
    pub wrote: bool,
}

/// Where the new holder's claim is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Claim {
    /// Not asked yet.
    NotYet,
    /// Waiting for the exclusive lock.
    Waiting,
    /// Holding it, the fence raised in its uncommitted transaction.
    Raised,
    /// Committed: the stored fence is 2, the lock let go.
    Committed,
}

/// The database's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The stored fence other transactions read (the committed one).
    pub stored: u8,
    /// The claim.
    pub claim: Claim,
    /// The old holder's transactions.
    pub txns: Vec<Txn>,
    /// A write under fence 1 committed after the claim committed.
    pub late_write: bool,
}

/// What the checker chooses next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Transaction `i` begins.
    Begin(usize),
    /// Transaction `i` makes a statement: the trigger checks, then writes.
    Statement(usize),
    /// Transaction `i` commits.
    Commit(usize),
    /// The new holder asks for its claim.
    Ask,
    /// The claim gets the exclusive lock and raises the fence.
    Raise,
    /// The claim commits.
    CommitClaim,
}

impl Model for FenceClaim {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let idle = Txn {
            phase: Phase::Idle,
            statements: 0,
            shared: false,
            wrote: false,
        };
        vec![State {
            stored: 1,
            claim: Claim::NotYet,
            txns: vec![idle; self.transactions],
            late_write: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (i, txn) in state.txns.iter().enumerate() {
            match txn.phase {
                Phase::Idle => actions.push(Action::Begin(i)),
                Phase::Open => {
                    // A check that takes the shared lock waits while the
                    // claim holds it exclusively.
                    let blocked = self.check != Check::WithoutTheLock
                        && state.claim == Claim::Raised
                        && !txn.shared;
                    if txn.statements < self.statements && !blocked {
                        actions.push(Action::Statement(i));
                    }
                    actions.push(Action::Commit(i));
                }
                Phase::Committed | Phase::Refused => {}
            }
        }
        match state.claim {
            Claim::NotYet => actions.push(Action::Ask),
            Claim::Waiting if state.txns.iter().all(|t| !t.shared) => actions.push(Action::Raise),
            Claim::Raised => actions.push(Action::CommitClaim),
            Claim::Waiting | Claim::Committed => {}
        }
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        match action {
            Action::Begin(i) => next.txns[i].phase = Phase::Open,
            Action::Statement(i) => {
                let txn = &mut next.txns[i];
                txn.statements += 1;
                txn.shared = self.check != Check::WithoutTheLock;
                // READ COMMITTED: a fresh read of the committed fence.
                if state.stored == 1 {
                    txn.wrote = true;
                } else {
                    txn.phase = Phase::Refused;
                    txn.shared = false;
                }
                if self.check == Check::HeldForTheStatement {
                    txn.shared = false;
                }
            }
            Action::Commit(i) => {
                let txn = &mut next.txns[i];
                if txn.wrote && state.claim == Claim::Committed {
                    next.late_write = true;
                }
                txn.phase = Phase::Committed;
                txn.shared = false;
            }
            Action::Ask => next.claim = Claim::Waiting,
            Action::Raise => next.claim = Claim::Raised,
            Action::CommitClaim => {
                next.claim = Claim::Committed;
                next.stored = 2;
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_LATE_WRITE, |_, s: &State| !s.late_write),
            Property::sometimes(OLD_WORK_FIRST, |_, s: &State| {
                s.claim == Claim::Committed
                    && s.txns
                        .iter()
                        .any(|t| t.phase == Phase::Committed && t.wrote)
            }),
            Property::sometimes(LATE_WRITE_REFUSED, |_, s: &State| {
                s.txns.iter().any(|t| t.phase == Phase::Refused)
            }),
        ]
    }
}

/// The promise: no write under the older fence commits after the newer
/// claim committed.
pub const NO_LATE_WRITE: &str = "no write under an older fence commits after a newer claim";

/// The case the claim waits for is reached: the old holder's committed
/// work, then the claim.
pub const OLD_WORK_FIRST: &str = "the old holder's committed writes come before the claim";

/// A paused holder's statement after the claim is refused.
pub const LATE_WRITE_REFUSED: &str = "a statement under the older fence is refused";
