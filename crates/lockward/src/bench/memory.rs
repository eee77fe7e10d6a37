//! What the store's server holds, in bytes, so a benchmark can divide the
//! growth by the locks it took: Redis `used_memory`, ZooKeeper's
//! approximate data size (`mntr`), etcd's database space in use, the size of
//! lockward's PostgreSQL tables. Embedded stores report nothing.

use crate::url::StoreUrl;

/// One reading of the server's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerMemory {
    /// Bytes.
    pub bytes: u64,
    /// What was read, e.g. `"used_memory"`.
    pub what: &'static str,
}

/// Reads the server's size now, or `None` for an embedded store or when
/// the server does not say (a ZooKeeper without `mntr` allowed).
pub async fn server_memory(url: &StoreUrl) -> Option<ServerMemory> {
    match url {
        #[cfg(feature = "redis")]
        StoreUrl::Redis(r) => redis_used(r).await,
        #[cfg(feature = "redis")]
        StoreUrl::Redlock(r) => redis_used(&r.master(r.masters.first()?)).await,
        #[cfg(feature = "zookeeper")]
        StoreUrl::Zookeeper(z) => {
            let e = z.endpoints.first()?;
            let mntr = crate::backend::zookeeper::doctor::four_letter(&e.host, e.port, "mntr").await;
            let bytes = mntr
                .lines()
                .find_map(|l| l.strip_prefix("zk_approximate_data_size"))?
                .trim()
                .parse()
                .ok()?;
            Some(ServerMemory {
                bytes,
                what: "zk_approximate_data_size",
            })
        }
        #[cfg(feature = "etcd")]
        StoreUrl::Etcd(e) => etcd_in_use(e).await,
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(p) => pg_tables(p).await,
        _ => None,
    }
}

#[cfg(feature = "redis")]
async fn redis_used(url: &crate::url::RedisUrl) -> Option<ServerMemory> {
    let conn = crate::backend::redis::conn::Conn::connect(url, None, false)
        .await
        .ok()?;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn.clone())
        .await
        .ok()?;
    let bytes = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))?
        .trim()
        .parse()
        .ok()?;
    Some(ServerMemory {
        bytes,
        what: "used_memory",
    })
}

/// Server bytes per bare `SET key token NX PX` key, measured by writing `n`
/// such keys (pipelined) and deleting them again: the floor a Redis lock's
/// memory is compared with.
#[cfg(feature = "redis")]
pub async fn redis_bare_key_bytes(url: &StoreUrl, prefix: &str, n: usize) -> Option<f64> {
    let redis_url = match url {
        StoreUrl::Redis(r) => r.clone(),
        StoreUrl::Redlock(r) => r.master(r.masters.first()?),
        _ => return None,
    };
    let conn = crate::backend::redis::conn::Conn::connect(&redis_url, None, false)
        .await
        .ok()?;
    let before = redis_used(&redis_url).await?.bytes;
    let token = crate::owner::OwnerId::random().to_string();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("SET")
                .arg(format!("{prefix}/bare/{i}"))
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(600_000)
                .ignore();
        }
        pipe.query_async::<()>(&mut conn.clone()).await.ok()?;
    }
    let after = redis_used(&redis_url).await?.bytes;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut del = redis::cmd("UNLINK");
        for i in chunk {
            del.arg(format!("{prefix}/bare/{i}"));
        }
        del.query_async::<()>(&mut conn.clone()).await.ok()?;
    }
    Some(after.saturating_sub(before) as f64 / n.max(1) as f64)
}

#[cfg(feature = "etcd")]
async fn etcd_in_use(url: &crate::url::EtcdUrl) -> Option<ServerMemory> {
    let mut client = crate::backend::etcd::side_client(url).await.ok()?;
    let status = client.status().await.ok()?;
    Some(ServerMemory {
        bytes: u64::try_from(status.raft_used_db_size()).ok()?,
        what: "db size in use",
    })
}

#[cfg(feature = "postgres")]
async fn pg_tables(url: &crate::url::PostgresUrl) -> Option<ServerMemory> {
    if url.mode == crate::url::PostgresMode::Advisory {
        return None;
    }
    let address = StoreUrl::Postgres(url.clone()).to_string();
    let client = crate::backend::postgres::conn::open(url, &address, |_| {}, || {})
        .await
        .ok()?;
    let row = client
        .query_one(
            "SELECT pg_total_relation_size($1::regclass)::bigint",
            &[&url.table],
        )
        .await
        .ok()?;
    Some(ServerMemory {
        bytes: u64::try_from(row.get::<_, i64>(0)).ok()?,
        what: "lock table size",
    })
}
