//! What a backend declares it guarantees: the capabilities the conformance
//! suite checks and code and docs read.

/// What a backend guarantees and how it behaves. Code and docs read these;
/// the conformance suite checks every claim.
///
/// Every store's, by URL:
///
#[doc = include_str!("../../../../docs/capabilities.md")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Waiters acquire in the order they started waiting.
    pub fifo: bool,
    /// Waiters are woken by the store (notify, pub/sub, watch) rather than
    /// by polling.
    pub pushed_wakeups: bool,
    /// The store itself frees the lock when the holder's session or
    /// connection dies, before the TTL (ephemeral nodes, advisory locks).
    pub server_detects_loss: bool,
    /// Expiry is timed by the store's clock, not by the clients' hosts.
    pub server_clock: bool,
    /// The store frees a lock whose TTL passed without renewal. False for
    /// session locks (PostgreSQL advisory mode): those are held until the
    /// holder releases them or its session ends, so a paused holder keeps
    /// its lock (and nobody else can take it meanwhile).
    pub expires: bool,
    /// Fences and locks survive reopening the store (and, for servers, a
    /// restart with persistence).
    pub durable: bool,
    /// Separate processes can share locks.
    pub cross_process: bool,
    /// Separate hosts can share locks.
    pub cross_host: bool,
    /// Records can be kept forever (permanent idempotency results): only
    /// on durable stores whose records live on disk, not in memory.
    pub permanent_records: bool,
    /// Read-write locks are native: a read or a write is one step of the
    /// store's (how each store keeps them: [`RwLock`](crate::recipe::RwLock)).
    /// Elsewhere [`RwLock`](crate::recipe::RwLock) is built on a lock and a
    /// semaphore.
    pub native_rw_lock: bool,
    /// Semaphores are kept by the store, an entry per holder and a count
    /// beside them ([`PermitBackend`](super::PermitBackend)), so a permit
    /// costs the same however many hold one; elsewhere
    /// [`Semaphore`](crate::recipe::Semaphore) keeps a ledger record of at
    /// most [`MAX_HOLDERS`](crate::recipe::MAX_HOLDERS) holders.
    pub native_semaphore: bool,
}

impl Capabilities {
    /// Whether a lock-delay ([`LockOptions::lock_delay`](crate::LockOptions::lock_delay))
    /// can be enforced: the store frees locks by time, not the moment a
    /// holder's session ends.
    pub const fn lock_delay(&self) -> bool {
        self.expires && !self.server_detects_loss
    }

    /// Whether an operator can end a holder's lease from elsewhere
    /// ([`Store::force_unlock`](crate::Store::force_unlock)): only where the
    /// store keeps leases, not where a lock lives in its holder's session
    /// (PostgreSQL advisory mode).
    pub const fn force_unlock(&self) -> bool {
        self.expires
    }
}

#[cfg(test)]
mod tests {
    use super::Capabilities;
    use crate::url::{StoreUrl, SCHEMES};

    /// The declared capabilities of the store `url` opens. The match has no
    /// catch-all, so a new store does not build until it has an arm here
    /// (and so a row in the table). `None`: its feature is not built.
    #[allow(unreachable_code, unused_variables)]
    fn declared(url: &StoreUrl) -> Option<Capabilities> {
        use crate::backend::*;
        Some(match url {
            StoreUrl::Memory => memory::CAPABILITIES,
            StoreUrl::Sqlite { .. } => {
                #[cfg(not(feature = "sqlite"))]
                return None;
                #[cfg(feature = "sqlite")]
                sqlite::CAPABILITIES
            }
            StoreUrl::Redis(_) => {
                #[cfg(not(feature = "redis"))]
                return None;
                #[cfg(feature = "redis")]
                redis::CAPABILITIES
            }
            StoreUrl::Redlock(_) => {
                #[cfg(not(feature = "redis"))]
                return None;
                #[cfg(feature = "redis")]
                redlock::CAPABILITIES
            }
            StoreUrl::Etcd(_) => {
                #[cfg(not(feature = "etcd"))]
                return None;
                #[cfg(feature = "etcd")]
                etcd::CAPABILITIES
            }
            StoreUrl::Zookeeper(_) => {
                #[cfg(not(feature = "zookeeper"))]
                return None;
                #[cfg(feature = "zookeeper")]
                zookeeper::CAPABILITIES
            }
            StoreUrl::Postgres(pg) => {
                #[cfg(not(feature = "postgres"))]
                return None;
                #[cfg(feature = "postgres")]
                match pg.mode {
                    postgres::PostgresMode::Lease => postgres::CAPABILITIES,
                    postgres::PostgresMode::Advisory => postgres::advisory::CAPABILITIES,
                }
            }
            StoreUrl::Mysql(my) => {
                #[cfg(not(feature = "mysql"))]
                return None;
                #[cfg(feature = "mysql")]
                match my.mode {
                    mysql::MysqlMode::Lease => mysql::CAPABILITIES,
                    mysql::MysqlMode::Named => mysql::named::CAPABILITIES,
                }
            }
            StoreUrl::Kubernetes(_) => {
                #[cfg(not(feature = "kubernetes"))]
                return None;
                #[cfg(feature = "kubernetes")]
                kubernetes::CAPABILITIES
            }
        })
    }

    fn fields(c: &Capabilities) -> [(&'static str, bool); 11] {
        [
            ("fifo", c.fifo),
            ("pushed_wakeups", c.pushed_wakeups),
            ("server_detects_loss", c.server_detects_loss),
            ("server_clock", c.server_clock),
            ("expires", c.expires),
            ("durable", c.durable),
            ("cross_process", c.cross_process),
            ("cross_host", c.cross_host),
            ("permanent_records", c.permanent_records),
            ("native_rw_lock", c.native_rw_lock),
            ("native_semaphore", c.native_semaphore),
        ]
    }

    #[test]
    fn the_capabilities_table_says_what_every_store_declares() {
        let table = include_str!("../../../../docs/capabilities.md");
        // The first table of the page.
        let lines = table.lines().skip_while(|l| !l.starts_with('|'));
        let mut rows = lines.take_while(|l| l.starts_with('|')).map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect::<Vec<_>>()
        });
        let header = rows.next().expect("a header row");
        let columns: Vec<&str> = fields(&crate::backend::memory::CAPABILITIES)
            .iter()
            .map(|(name, _)| *name)
            .collect();
        assert_eq!(
            header[1..],
            columns[..],
            "the table's columns are the fields, in order"
        );
        let mut seen = std::collections::BTreeSet::new();
        for row in rows.skip(1) {
            let url = StoreUrl::parse(row[0].trim_matches('`')).expect(row[0]);
            seen.insert(url.scheme().to_string());
            let Some(declared) = declared(&url) else {
                continue;
            };
            for ((name, value), cell) in fields(&declared).iter().zip(&row[1..]) {
                let shown = match *cell {
                    "yes" => true,
                    "no" => false,
                    other => panic!("{}: {name} is {other:?}, not yes or no", row[0]),
                };
                assert_eq!(shown, *value, "{}: {name}", row[0]);
            }
        }
        // Every scheme lockward knows has a row, but the TLS forms and
        // aliases of another; and every row's scheme is one it knows.
        const ALIASES: &[&str] = &[
            "rediss",
            "rediss+cluster",
            "rediss+sentinel",
            "etcds",
            "zks",
            "postgresql",
            "mariadb",
            "kubernetes",
        ];
        for scheme in SCHEMES.iter().filter(|s| !ALIASES.contains(s)) {
            assert!(seen.contains(*scheme), "no row for {scheme}://");
        }
        for scheme in &seen {
            assert!(
                SCHEMES.contains(&scheme.as_str()),
                "{scheme}:// is not in url::SCHEMES"
            );
        }
    }

    #[test]
    fn the_readmes_store_table_says_which_stores_are_fifo_as_they_declare() {
        let readme = include_str!("../../../../README.md");
        let table = readme
            .split("| URL | backend | waiting | FIFO |")
            .nth(1)
            .expect("the README's store table");
        let mut rows = 0;
        for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
            rows += 1;
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            let shown = cells[0];
            let scheme = shown
                .trim_start_matches('`')
                .split("://")
                .next()
                .expect("a scheme");
            // A URL of the row's store that parses: the README shows the
            // form, with placeholders.
            let base = match scheme {
                "memory" => "memory://".to_string(),
                "sqlite" => "sqlite://locks.db".to_string(),
                "redlock" => "redlock://a:1,b:1,c:1".to_string(),
                "postgres" | "mysql" => format!("{scheme}://u@h/db"),
                "k8s" => "k8s://".to_string(),
                "redis" | "rediss" | "redis+cluster" | "etcd" | "zk" => format!("{scheme}://h:1"),
                "redis+sentinel" => "redis+sentinel://h:1/primary".to_string(),
                other => panic!("a row for {other}:// that this test does not know"),
            };
            let url = match shown.split("?mode=").nth(1) {
                Some(mode) => format!("{base}?mode={}", mode.trim_end_matches('`')),
                None => base,
            };
            let url = StoreUrl::parse(&url).expect(&url);
            let Some(declared) = declared(&url) else {
                continue;
            };
            let fifo = match cells[3] {
                "yes" => true,
                "no" => false,
                other => panic!("{shown}: FIFO is {other:?}, not yes or no"),
            };
            assert_eq!(fifo, declared.fifo, "{shown}: FIFO");
        }
        assert!(rows >= 14, "only {rows} rows in the README's store table");
    }
}
