use std::sync::OnceLock;

use lockward::Store;
use lockward_testkit::PostgresServer;

use crate::suite::Fixture;

/// One server for the whole suite.
pub fn server() -> &'static PostgresServer {
    static SERVER: OnceLock<PostgresServer> = OnceLock::new();
    SERVER.get_or_init(PostgresServer::start)
}

struct Postgres(String);

#[async_trait::async_trait]
impl Fixture for Postgres {
    async fn store(&self) -> Store {
        Store::open(&self.0).await.expect("open postgres store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
}

pub mod lease {
    use super::*;

    async fn fixture() -> Postgres {
        Postgres(server().url())
    }

    /// The suite on this set-up.
    pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
        crate::suite::register(
            trials,
            "postgres::lease",
            lockward::backend::postgres::CAPABILITIES,
            fixture,
        );
    }
}

pub mod advisory {
    use super::*;

    async fn fixture() -> Postgres {
        Postgres(format!("{}?mode=advisory", server().url()))
    }

    /// The suite on this set-up.
    pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
        crate::suite::register(
            trials,
            "postgres::advisory",
            lockward::backend::postgres::advisory::CAPABILITIES,
            fixture,
        );
    }
}

/// The suite on every set-up of this backend.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    lease::register(trials);
    advisory::register(trials);
}
