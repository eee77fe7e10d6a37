use lockward::Store;

use crate::suite::Fixture;

struct Memory(Store);

#[async_trait::async_trait]
impl Fixture for Memory {
    async fn store(&self) -> Store {
        // Every handle shares the one in-process store.
        self.0.clone()
    }
    fn url(&self) -> String {
        "memory://".into()
    }
    /// Waiters on one handle wait in its local line, which the store does
    /// not see: the order checks space them out in time instead.
    async fn waiting(&self, _holder: &Store, _name: &str) -> Option<usize> {
        None
    }
}

async fn fixture() -> Memory {
    Memory(Store::memory())
}

/// The suite on this backend.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    crate::suite::register(
        trials,
        "memory",
        lockward::backend::memory::CAPABILITIES,
        fixture,
    );
}
