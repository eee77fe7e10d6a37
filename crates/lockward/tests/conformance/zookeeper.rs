use std::sync::OnceLock;

use lockward::Store;
use lockward_testkit::ZookeeperEnsemble;

use crate::suite::Fixture;

fn single() -> &'static ZookeeperEnsemble {
    static ZK: OnceLock<ZookeeperEnsemble> = OnceLock::new();
    ZK.get_or_init(ZookeeperEnsemble::start_single)
}

fn three() -> &'static ZookeeperEnsemble {
    static ZK: OnceLock<ZookeeperEnsemble> = OnceLock::new();
    ZK.get_or_init(ZookeeperEnsemble::start_three)
}

/// Sessions of a minute, so the suite's longest TTL fits in one.
struct Zookeeper(String);

#[async_trait::async_trait]
impl Fixture for Zookeeper {
    async fn store(&self) -> Store {
        Store::open(&self.0).await.expect("open ZooKeeper store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
}

pub mod standalone {
    use super::*;

    async fn fixture() -> Zookeeper {
        Zookeeper(format!("{}?session_timeout=60s", single().url()))
    }

    /// The suite on this set-up.
    pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
        crate::suite::register(
            trials,
            "zookeeper::standalone",
            lockward::backend::zookeeper::CAPABILITIES,
            fixture,
        );
    }
}

pub mod ensemble {
    use super::*;

    async fn fixture() -> Zookeeper {
        Zookeeper(format!("{}?session_timeout=60s", three().url()))
    }

    /// The suite on this set-up.
    pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
        crate::suite::register(
            trials,
            "zookeeper::ensemble",
            lockward::backend::zookeeper::CAPABILITIES,
            fixture,
        );
    }
}

/// The suite on every set-up of this backend.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    standalone::register(trials);
    ensemble::register(trials);
}
