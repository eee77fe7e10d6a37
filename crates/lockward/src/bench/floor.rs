//! The store's floor: one round trip of its cheapest write, with the same
//! kind of client lockward uses (Redis `SET`, etcd put, ZooKeeper create,
//! PostgreSQL `SELECT 1`). Embedded stores have none.

use std::time::Duration;
#[cfg(any(
    feature = "redis",
    feature = "etcd",
    feature = "zookeeper",
    feature = "postgres"
))]
use std::time::Instant;

use crate::url::StoreUrl;

/// Median round trip of the floor operation over `samples`, or `None` for
/// an embedded store or when it cannot be measured.
pub async fn floor(url: &StoreUrl, samples: usize) -> Option<Duration> {
    let times: Option<Vec<Duration>> = match url {
        #[cfg(feature = "redis")]
        StoreUrl::Redis(r) => redis_set(r, samples).await,
        #[cfg(feature = "redis")]
        StoreUrl::Redlock(r) => redis_set(&r.master(r.masters.first()?), samples).await,
        #[cfg(feature = "etcd")]
        StoreUrl::Etcd(e) => etcd_put(e, samples).await,
        #[cfg(feature = "zookeeper")]
        StoreUrl::Zookeeper(z) => zk_create(z, samples).await,
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(p) => pg_select(p, samples).await,
        _ => {
            let _ = samples;
            None
        }
    };
    let mut latencies = super::Latencies::new();
    for t in times? {
        latencies.record(t);
    }
    Some(latencies.quantile(0.5))
}

#[cfg(feature = "redis")]
async fn redis_set(url: &crate::url::RedisUrl, samples: usize) -> Option<Vec<Duration>> {
    let conn = crate::backend::redis::conn::Conn::connect(url, None, false)
        .await
        .ok()?;
    let mut out = Vec::new();
    for _ in 0..samples {
        let began = Instant::now();
        redis::cmd("SET")
            .arg("lockward-bench-floor")
            .arg("1")
            .query_async::<()>(&mut conn.clone())
            .await
            .ok()?;
        out.push(began.elapsed());
    }
    Some(out)
}

#[cfg(feature = "etcd")]
async fn etcd_put(url: &crate::url::EtcdUrl, samples: usize) -> Option<Vec<Duration>> {
    let scheme = if url.tls { "https" } else { "http" };
    let endpoints: Vec<String> = url
        .endpoints
        .iter()
        .map(|e| format!("{scheme}://{e}"))
        .collect();
    let mut options = etcd_client::ConnectOptions::new();
    if let (Some(user), Some(password)) = (&url.user, &url.password) {
        options = options.with_user(user.clone(), password.expose().to_string());
    }
    let mut client = etcd_client::Client::connect(endpoints, Some(options))
        .await
        .ok()?;
    let mut out = Vec::new();
    for _ in 0..samples {
        let began = Instant::now();
        client.put("lockward-bench-floor", "1", None).await.ok()?;
        out.push(began.elapsed());
    }
    Some(out)
}

#[cfg(feature = "zookeeper")]
async fn zk_create(url: &crate::url::ZookeeperUrl, samples: usize) -> Option<Vec<Duration>> {
    use zookeeper_client::{Acls, Client, CreateMode};
    let hosts: Vec<String> = url.endpoints.iter().map(|e| e.to_string()).collect();
    let mut connector = Client::connector();
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
    let opts = CreateMode::Ephemeral.with_acls(acls);
    let path = format!("/lockward-bench-floor-{}", crate::owner::OwnerId::random());
    let mut out = Vec::new();
    for _ in 0..samples {
        let began = Instant::now();
        client.create(&path, b"", &opts).await.ok()?;
        out.push(began.elapsed());
        client.delete(&path, None).await.ok()?;
    }
    Some(out)
}

#[cfg(feature = "postgres")]
async fn pg_select(url: &crate::url::PostgresUrl, samples: usize) -> Option<Vec<Duration>> {
    let address = StoreUrl::Postgres(url.clone()).to_string();
    let client = crate::backend::postgres::conn::open(url, &address, |_| {}, || {})
        .await
        .ok()?;
    let mut out = Vec::new();
    for _ in 0..samples {
        let began = Instant::now();
        client.query_one("SELECT 1", &[]).await.ok()?;
        out.push(began.elapsed());
    }
    Some(out)
}
