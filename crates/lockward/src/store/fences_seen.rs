//! The highest fence a store handle has seen granted per lock name: a grant
//! whose fence is not above it means the store went back (a restore from
//! an older backup, a counter reset), and is given back rather than handed
//! out, since a paused holder may carry that very fence.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::name::Name;

/// How many names are remembered; past it the memory starts afresh (a
/// name's check then begins again at its next grant).
const MOST_NAMES: usize = 65_536;

/// Per lock name, the highest fence granted through this handle.
#[derive(Debug, Default)]
pub(crate) struct FencesSeen(Mutex<HashMap<Name, u64>>);

impl FencesSeen {
    /// Records `fence` granted for `name`; `Err` with the highest fence
    /// seen before when `fence` is not above it (then nothing changes).
    pub(crate) fn record(&self, name: &Name, fence: u64) -> Result<(), u64> {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(last) = seen.get_mut(name) {
            if fence <= *last {
                return Err(*last);
            }
            *last = fence;
            return Ok(());
        }
        if seen.len() >= MOST_NAMES {
            seen.clear();
        }
        seen.insert(name.clone(), fence);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_not_above_the_last_one_is_refused_and_changes_nothing() {
        let seen = FencesSeen::default();
        let name = Name::new("job").unwrap();
        assert_eq!(seen.record(&name, 5), Ok(()));
        assert_eq!(seen.record(&name, 9), Ok(()));
        assert_eq!(seen.record(&name, 9), Err(9));
        assert_eq!(seen.record(&name, 7), Err(9));
        assert_eq!(seen.record(&name, 10), Ok(()));
        // Other names are their own.
        assert_eq!(seen.record(&Name::new("other").unwrap(), 1), Ok(()));
    }
}
