use std::sync::OnceLock;

use lockward::Store;
use lockward_testkit::RedisSentinels;

use crate::suite::Fixture;

/// One primary, a replica and three sentinels for the whole suite.
pub fn sentinels() -> &'static RedisSentinels {
    static SENTINELS: OnceLock<RedisSentinels> = OnceLock::new();
    SENTINELS.get_or_init(|| RedisSentinels::start(1))
}

struct Sentinel(String);

#[async_trait::async_trait]
impl Fixture for Sentinel {
    async fn store(&self) -> Store {
        Store::open(&self.0)
            .await
            .expect("open redis+sentinel store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
}

async fn fixture() -> Sentinel {
    Sentinel(sentinels().url())
}

/// The suite on the primary Sentinel names.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    crate::suite::register(
        trials,
        "redis_sentinel",
        lockward::backend::redis::CAPABILITIES,
        fixture,
    );
}
