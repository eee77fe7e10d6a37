use std::sync::OnceLock;

use lockward::Store;
use lockward_testkit::MariadbServer;

use crate::suite::Fixture;

/// One server for the whole suite.
pub fn server() -> &'static MariadbServer {
    static SERVER: OnceLock<MariadbServer> = OnceLock::new();
    SERVER.get_or_init(MariadbServer::start)
}

struct Mysql(String);

#[async_trait::async_trait]
impl Fixture for Mysql {
    async fn store(&self) -> Store {
        Store::open(&self.0).await.expect("open mysql store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
}

pub mod lease {
    use super::*;

    async fn fixture() -> Mysql {
        Mysql(server().url())
    }

    /// The suite on this set-up.
    pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
        crate::suite::register(
            trials,
            "mysql::lease",
            lockward::backend::mysql::CAPABILITIES,
            fixture,
        );
    }
}

pub mod named {
    use super::*;

    async fn fixture() -> Mysql {
        Mysql(format!("{}?mode=named", server().url()))
    }

    /// The suite on this set-up.
    pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
        crate::suite::register(
            trials,
            "mysql::named",
            lockward::backend::mysql::named::CAPABILITIES,
            fixture,
        );
    }
}

/// The suite on every set-up of this backend (MariaDB).
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    lease::register(trials);
    named::register(trials);
}
