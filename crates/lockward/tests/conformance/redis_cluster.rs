use std::sync::OnceLock;

use lockward::Store;
use lockward_testkit::RedisCluster;

use crate::suite::Fixture;

/// One 3-primary cluster for the whole suite.
fn cluster() -> &'static RedisCluster {
    static CLUSTER: OnceLock<RedisCluster> = OnceLock::new();
    CLUSTER.get_or_init(RedisCluster::start)
}

struct Cluster(String);

#[async_trait::async_trait]
impl Fixture for Cluster {
    async fn store(&self) -> Store {
        Store::open(&self.0)
            .await
            .expect("open redis cluster store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
}

async fn fixture() -> Cluster {
    Cluster(cluster().url())
}

/// The suite on this backend.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    crate::suite::register(
        trials,
        "redis_cluster",
        lockward::backend::redis::CAPABILITIES,
        fixture,
    );
    crate::suite::own(
        trials,
        "redis_cluster::keys_share_a_slot_and_names_spread",
        keys_share_a_slot_and_names_spread,
    );
}

/// Every key of a name sits in one slot, and names spread over the nodes.
async fn keys_share_a_slot_and_names_spread() {
    let c = cluster();
    let store = Store::open(&c.url()).await.unwrap();
    let mut guards = Vec::new();
    for i in 0..30 {
        guards.push(
            store
                .try_acquire(format!("spread/{i}"), &Default::default())
                .await
                .unwrap(),
        );
    }
    let lock_slot = c.cli(&["CLUSTER", "KEYSLOT", "lockward:{spread/7}"]);
    let fence_slot = c.cli(&["CLUSTER", "KEYSLOT", "lockward:{spread/7}:fence"]);
    assert_eq!(lock_slot, fence_slot);
    let holding: Vec<usize> = c
        .nodes()
        .iter()
        .map(|n| n.cli(&["DBSIZE"]).parse().unwrap())
        .collect();
    assert!(
        holding.iter().filter(|n| **n > 0).count() >= 2,
        "{holding:?}"
    );
    assert_eq!(store.list("spread/").await.unwrap().len(), 30);
    for g in guards {
        g.release().await.unwrap();
    }
}
