use std::sync::OnceLock;

use lockward::Store;
use lockward_testkit::PostgresServer;

use crate::suite::Fixture;

/// One server for the whole suite.
pub fn server() -> &'static PostgresServer {
    static SERVER: OnceLock<PostgresServer> = OnceLock::new();
    SERVER.get_or_init(PostgresServer::start)
}

/// A store's URL, and what its waiters queue on in the server's lock
/// manager: `TABLE:` (advisory mode's lock) or `TABLE#baton:` (lease mode's
/// baton) before the name.
struct Postgres(String, &'static str);

#[async_trait::async_trait]
impl Fixture for Postgres {
    async fn store(&self) -> Store {
        Store::open(&self.0).await.expect("open postgres store")
    }
    fn url(&self) -> String {
        self.0.clone()
    }
    /// Sessions holding or waiting for the name's advisory lock (a bigint
    /// key shows as its two halves in `pg_locks`): one more per waiter.
    async fn waiting(&self, _holder: &Store, name: &str) -> Option<usize> {
        let key = format!("{}{}", self.1, name).replace('\'', "''");
        let sql = format!(
            "SELECT count(*) FROM pg_locks, (SELECT hashtextextended('{key}', 0) AS k) key
             WHERE locktype = 'advisory' AND objsubid = 1
               AND classid = ((k >> 32) & 4294967295)::oid AND objid = (k & 4294967295)::oid"
        );
        let count = tokio::task::spawn_blocking(move || server().psql(&sql))
            .await
            .expect("psql");
        Some(count.trim().parse().expect("a count from pg_locks"))
    }
}

pub mod lease {
    use super::*;

    async fn fixture() -> Postgres {
        Postgres(server().url(), "lockward_locks#baton:")
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
        Postgres(
            format!("{}?mode=advisory", server().url()),
            "lockward_advisory:",
        )
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
