use std::sync::OnceLock;
use std::time::Duration;

use lockward::Store;
use lockward_testkit::KubeApiServer;

use crate::suite::Fixture;

fn server() -> &'static KubeApiServer {
    static SERVER: OnceLock<KubeApiServer> = OnceLock::new();
    SERVER.get_or_init(KubeApiServer::start)
}

struct Kubernetes(String);

#[async_trait::async_trait]
impl Fixture for Kubernetes {
    async fn store(&self) -> Store {
        Store::open(&self.0).await.expect("open k8s store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
    /// A 1 s Lease (whole seconds), counted from when an observer first
    /// saw it, which may be up to another second later.
    fn server_ttl_floor(&self) -> Duration {
        Duration::from_secs(2)
    }
}

async fn fixture() -> Kubernetes {
    Kubernetes(server().url())
}

/// The suite on a real kube-apiserver.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    crate::suite::register(
        trials,
        "kubernetes",
        lockward::backend::kubernetes::CAPABILITIES,
        fixture,
    );
}
