use std::sync::OnceLock;

use lockward::Store;
use lockward_testkit::RedisServer;

use crate::suite::Fixture;

/// One server for the whole suite: each check uses its own lock names.
pub fn server() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

struct Redis(String);

#[async_trait::async_trait]
impl Fixture for Redis {
    async fn store(&self) -> Store {
        Store::open(&self.0).await.expect("open redis store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
}

async fn fixture() -> Redis {
    Redis(server().url())
}

/// The suite on this backend.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    crate::suite::register(
        trials,
        "redis",
        lockward::backend::redis::CAPABILITIES,
        fixture,
    );
}
