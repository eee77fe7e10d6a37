use std::sync::{Mutex, OnceLock};

use lockward::Store;
use lockward_testkit::{RedisMasters, RedisOptions};

use crate::suite::Fixture;

/// Five masters for the whole suite.
fn url() -> &'static str {
    static MASTERS: OnceLock<(Mutex<RedisMasters>, String)> = OnceLock::new();
    &MASTERS
        .get_or_init(|| {
            let masters = RedisMasters::start(5, RedisOptions::default());
            let url = masters.url();
            (Mutex::new(masters), url)
        })
        .1
}

struct Redlock(String);

#[async_trait::async_trait]
impl Fixture for Redlock {
    async fn store(&self) -> Store {
        Store::open(&self.0).await.expect("open redlock store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
}

async fn fixture() -> Redlock {
    Redlock(url().to_string())
}

/// The suite on this backend.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    crate::suite::register(
        trials,
        "redlock",
        lockward::backend::redlock::CAPABILITIES,
        fixture,
    );
}
