//! Models of lockward's lock protocols, checked exhaustively within stated
//! bounds by stateright: each module models one protocol and names the
//! source file it mirrors; its invariants are the promises the README
//! makes, and a broken variant of each (the rule the code does not use)
//! must give a counterexample, so a model that checks nothing fails its
//! tests (docs/models.md).

pub mod fence_claim;
pub mod lease_deadline;
pub mod lost_writes;
pub mod redis_line;
pub mod redlock;

use stateright::{Checker, Model};

/// What a check of a model found: the states it visited and, per property,
/// whether a discovery (a counterexample of an `always`, an example of a
/// `sometimes`) was found.
#[derive(Debug)]
pub struct Checked {
    /// Distinct states visited.
    pub states: usize,
    /// The deepest path explored.
    pub depth: usize,
    /// Each property's name, and whether it has a discovery.
    pub discoveries: Vec<(&'static str, bool)>,
}

impl Checked {
    /// Whether `property` has a discovery.
    pub fn found(&self, property: &str) -> bool {
        self.discoveries
            .iter()
            .any(|(name, found)| *name == property && *found)
    }
}

/// Checks `model` breadth first over every state within its bounds.
pub fn check<M>(model: M) -> Checked
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    let names: Vec<&'static str> = model.properties().iter().map(|p| p.name).collect();
    let checker = model.checker().spawn_bfs().join();
    let found = checker.discoveries();
    Checked {
        states: checker.unique_state_count(),
        depth: checker.max_depth(),
        discoveries: names
            .into_iter()
            .map(|name| (name, found.contains_key(name)))
            .collect(),
    }
}
