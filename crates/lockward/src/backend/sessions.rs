//! What the stores whose locks live in server sessions (MySQL's named
//! locks and batons, PostgreSQL's advisory locks and batons) keep of those
//! sessions, whatever the driver: the idle ones, for the next lock or wait,
//! and the ones that hold something for a holder of this process.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::name::Name;
use crate::owner::OwnerId;

/// The most idle sessions a store keeps; more are closed when given back
/// (a burst of waiters would otherwise keep as many connections open).
pub(crate) const MAX_IDLE: usize = 16;

/// A store's sessions that hold nothing, newest last.
pub(crate) struct IdleSessions<S>(Mutex<Vec<S>>);

impl<S> Default for IdleSessions<S> {
    fn default() -> Self {
        IdleSessions(Mutex::new(Vec::new()))
    }
}

impl<S> IdleSessions<S> {
    /// The most recently idle session that `usable` accepts; the ones it
    /// refuses on the way are dropped, which closes them.
    pub(crate) fn take(&self, usable: impl Fn(&S) -> bool) -> Option<S> {
        let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
        std::iter::from_fn(|| idle.pop()).find(|s| usable(s))
    }

    /// Keeps `session`, which holds nothing, for the next use; dropped
    /// (closed) instead when [`MAX_IDLE`] are idle already.
    pub(crate) fn put_back(&self, session: S) {
        let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(session);
        }
    }
}

/// The sessions holding something (a lock, a baton) for this process's
/// holders, by name and owner.
pub(crate) struct HeldSessions<S>(Mutex<HashMap<(Name, OwnerId), S>>);

impl<S> Default for HeldSessions<S> {
    fn default() -> Self {
        HeldSessions(Mutex::new(HashMap::new()))
    }
}

impl<S> HeldSessions<S> {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(Name, OwnerId), S>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `session` as the one holding `name` for `owner`.
    pub(crate) fn insert(&self, name: &Name, owner: OwnerId, session: S) {
        self.map().insert((name.clone(), owner), session);
    }

    /// The session holding `name` for `owner`, forgotten here.
    pub(crate) fn remove(&self, name: &Name, owner: OwnerId) -> Option<S> {
        self.map().remove(&(name.clone(), owner))
    }

    /// The session holding `name` for `owner`, kept here.
    pub(crate) fn get(&self, name: &Name, owner: OwnerId) -> Option<S>
    where
        S: Clone,
    {
        self.map().get(&(name.clone(), owner)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_max_idle_and_skips_the_unusable() {
        let idle = IdleSessions::default();
        for i in 0..MAX_IDLE + 5 {
            idle.put_back(i);
        }
        // The newest kept is MAX_IDLE - 1; odd ones are refused and dropped.
        assert_eq!(idle.take(|s| s % 2 == 0), Some(MAX_IDLE - 2));
        assert_eq!(idle.take(|_| true), Some(MAX_IDLE - 3));
        let held = HeldSessions::default();
        let (name, owner) = (Name::new("a").unwrap(), OwnerId::random());
        held.insert(&name, owner, 7);
        assert_eq!(held.get(&name, owner), Some(7));
        assert_eq!(held.remove(&name, owner), Some(7));
        assert_eq!(held.remove(&name, owner), None);
    }
}
