use std::sync::OnceLock;
use std::time::Duration;

use lockward::Store;
use lockward_testkit::EtcdCluster;

use crate::suite::Fixture;

fn single() -> &'static EtcdCluster {
    static ETCD: OnceLock<EtcdCluster> = OnceLock::new();
    ETCD.get_or_init(EtcdCluster::start_single)
}

fn three() -> &'static EtcdCluster {
    static ETCD: OnceLock<EtcdCluster> = OnceLock::new();
    ETCD.get_or_init(EtcdCluster::start_three)
}

struct Etcd(String);

#[async_trait::async_trait]
impl Fixture for Etcd {
    async fn store(&self) -> Store {
        Store::open(&self.0).await.expect("open etcd store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
    /// A 1 s lease (etcd's whole seconds), plus the leader's expiry sweep,
    /// which runs every 500 ms.
    fn server_ttl_floor(&self) -> Duration {
        Duration::from_secs(2)
    }
}

pub mod one_member {
    use super::*;

    async fn fixture() -> Etcd {
        Etcd(single().url())
    }

    /// The suite on this set-up.
    pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
        crate::suite::register(
            trials,
            "etcd::one_member",
            lockward::backend::etcd::CAPABILITIES,
            fixture,
        );
    }
}

pub mod three_members {
    use super::*;

    async fn fixture() -> Etcd {
        Etcd(three().url())
    }

    /// The suite on this set-up.
    pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
        crate::suite::register(
            trials,
            "etcd::three_members",
            lockward::backend::etcd::CAPABILITIES,
            fixture,
        );
    }
}

/// The suite on every set-up of this backend.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    one_member::register(trials);
    three_members::register(trials);
}
