//! The store's floor: one round trip of its cheapest write, with the same
//! kind of client lockward uses (Redis `SET`, etcd put, ZooKeeper create,
//! PostgreSQL `SELECT 1`). Embedded stores have none.
//!
//! On a small, shared machine a round trip's cost drifts with what else
//! runs, so a ratio is only fair when both sides are sampled at the same
//! moments: [`FloorProbe`] takes one sample at a time, to interleave with
//! the measurement it is compared to.

use std::time::Duration;
#[cfg(any(
    feature = "redis",
    feature = "etcd",
    feature = "zookeeper",
    feature = "postgres"
))]
use std::time::Instant;

use crate::url::StoreUrl;

/// A connection to a store that times one floor round trip at a time.
pub struct FloorProbe {
    client: Client,
}

enum Client {
    #[cfg(feature = "redis")]
    Redis(crate::backend::redis::conn::Conn),
    #[cfg(feature = "etcd")]
    Etcd(Box<etcd_client::Client>),
    #[cfg(feature = "zookeeper")]
    Zookeeper {
        client: zookeeper_client::Client,
        path: String,
        acls: zookeeper_client::Acls<'static>,
    },
    #[cfg(feature = "postgres")]
    Postgres(tokio_postgres::Client),
}

impl FloorProbe {
    /// Connects to the store of `url`; `None` for an embedded store or when
    /// it cannot be reached.
    pub async fn connect(url: &StoreUrl) -> Option<FloorProbe> {
        let client = match url {
            #[cfg(feature = "redis")]
            StoreUrl::Redis(r) => redis_conn(r).await.map(Client::Redis),
            #[cfg(feature = "redis")]
            StoreUrl::Redlock(r) => redis_conn(&r.master(r.masters.first()?))
                .await
                .map(Client::Redis),
            #[cfg(feature = "etcd")]
            StoreUrl::Etcd(e) => crate::backend::etcd::side_client(e)
                .await
                .ok()
                .map(|c| Client::Etcd(Box::new(c))),
            #[cfg(feature = "zookeeper")]
            StoreUrl::Zookeeper(z) => zk_client(z).await,
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(p) => pg_client(p).await.map(Client::Postgres),
            _ => None,
        }?;
        Some(FloorProbe { client })
    }

    /// One round trip of the floor operation; `None` when it failed.
    pub async fn round_trip(&mut self) -> Option<Duration> {
        #[cfg(any(
            feature = "redis",
            feature = "etcd",
            feature = "zookeeper",
            feature = "postgres"
        ))]
        let began = Instant::now();
        match &mut self.client {
            #[cfg(feature = "redis")]
            Client::Redis(conn) => {
                redis::cmd("SET")
                    .arg("lockward-bench-floor")
                    .arg("1")
                    .query_async::<()>(&mut conn.clone())
                    .await
                    .ok()?;
                Some(began.elapsed())
            }
            #[cfg(feature = "etcd")]
            Client::Etcd(client) => {
                client.put("lockward-bench-floor", "1", None).await.ok()?;
                Some(began.elapsed())
            }
            #[cfg(feature = "zookeeper")]
            Client::Zookeeper { client, path, acls } => {
                let opts = zookeeper_client::CreateMode::Ephemeral.with_acls(*acls);
                client.create(path, b"", &opts).await.ok()?;
                let took = began.elapsed();
                client.delete(path, None).await.ok()?;
                Some(took)
            }
            #[cfg(feature = "postgres")]
            Client::Postgres(client) => {
                client.query_one("SELECT 1", &[]).await.ok()?;
                Some(began.elapsed())
            }
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

/// Median round trip of the floor operation over `samples`, or `None` for
/// an embedded store or when it cannot be measured.
pub async fn floor(url: &StoreUrl, samples: usize) -> Option<Duration> {
    let mut probe = FloorProbe::connect(url).await?;
    let mut latencies = super::Latencies::new();
    for _ in 0..samples {
        latencies.record(probe.round_trip().await?);
    }
    Some(latencies.quantile(0.5))
}

#[cfg(feature = "redis")]
async fn redis_conn(url: &crate::url::RedisUrl) -> Option<crate::backend::redis::conn::Conn> {
    crate::backend::redis::conn::Conn::connect(url, None, false)
        .await
        .ok()
}

#[cfg(feature = "zookeeper")]
async fn zk_client(url: &crate::url::ZookeeperUrl) -> Option<Client> {
    use zookeeper_client::Acls;
    let hosts: Vec<String> = url.endpoints.iter().map(|e| e.to_string()).collect();
    let mut connector = zookeeper_client::Client::connector();
    if let (Some(user), Some(password)) = (&url.user, &url.password) {
        let credentials = format!("{user}:{}", password.expose());
        connector = connector.with_auth("digest", credentials.as_bytes());
    }
    let client = connector.connect(&hosts.join(",")).await.ok()?;
    let acls = if url.user.is_some() {
        Acls::creator_all()
    } else {
        Acls::anyone_all()
    };
    let path = format!("/lockward-bench-floor-{}", crate::owner::OwnerId::random());
    Some(Client::Zookeeper { client, path, acls })
}

#[cfg(feature = "postgres")]
async fn pg_client(url: &crate::url::PostgresUrl) -> Option<tokio_postgres::Client> {
    let address = StoreUrl::Postgres(url.clone()).to_string();
    crate::backend::postgres::conn::open(url, &address, |_| {}, || {})
        .await
        .ok()
}
