//! The locks being compared, behind one face: open one client, wait for a
//! lock the way the crate's own API waits, release it.

use std::time::Duration;

use distributed_lock_core::{DistributedLock, LockHandle, LockProvider};
use distributed_lock_postgres::handle::PostgresLockHandle;
use distributed_lock_postgres::PostgresLockProvider;
use distributed_lock_redis::{RedisLockHandle, RedisLockProvider};
use lockward::{Guard, LockOptions, Renewal, Store};
use rslock::LockManager;

/// The lease every contender asks for.
pub const TTL: Duration = Duration::from_secs(10);

/// distributed-lock's Redis `acquire` makes one attempt and reports a
/// timeout when the lock is held, so its callers retry: every 10 ms here.
const DL_REDIS_RETRY: Duration = Duration::from_millis(10);

/// Which crate, and the server URL it is given.
#[derive(Clone)]
pub enum Kind {
    Lockward(String),
    /// Its Redis servers: one, or Redlock's N masters.
    Rslock(Vec<String>),
    /// Its Redis servers: one, or Redlock's N masters.
    DistributedLockRedis(Vec<String>),
    DistributedLockPostgres(String),
}

impl Kind {
    pub fn label(&self) -> String {
        match self {
            Kind::Lockward(url) => {
                let scheme = url.split("://").next().unwrap_or("");
                let mode = url.split_once("mode=").map_or("", |(_, m)| m);
                format!(
                    "lockward {scheme}{}",
                    if mode.is_empty() {
                        String::new()
                    } else {
                        format!(" {mode}")
                    }
                )
            }
            Kind::Rslock(_) => "rslock".into(),
            Kind::DistributedLockRedis(_) => "distributed-lock redis".into(),
            Kind::DistributedLockPostgres(_) => "distributed-lock postgres".into(),
        }
    }

    /// Whether the crate's waiting is a retry loop (not woken by the server).
    pub fn polls(&self) -> bool {
        matches!(self, Kind::Rslock(_) | Kind::DistributedLockRedis(_))
    }

    /// One client of this kind.
    pub async fn open(&self) -> Contender {
        match self {
            Kind::Lockward(url) => {
                Contender::Lockward(Store::open(url).await.expect("lockward store"))
            }
            Kind::Rslock(urls) => Contender::Rslock(LockManager::new(urls.clone())),
            Kind::DistributedLockRedis(urls) => Contender::DlRedis(
                RedisLockProvider::builder()
                    .urls(urls)
                    .expiry(TTL)
                    .min_validity(TTL * 9 / 10)
                    .extension_cadence(TTL / 3)
                    .build()
                    .await
                    .expect("distributed-lock redis"),
            ),
            Kind::DistributedLockPostgres(url) => Contender::DlPostgres(
                PostgresLockProvider::builder()
                    .connection_string(url.clone())
                    .build()
                    .await
                    .expect("distributed-lock postgres"),
            ),
        }
    }
}

/// One open client.
pub enum Contender {
    Lockward(Store),
    Rslock(LockManager),
    DlRedis(RedisLockProvider),
    DlPostgres(PostgresLockProvider),
}

/// A lock one contender holds.
pub enum Held {
    Lockward(Guard),
    Rslock(LockManager, rslock::Lock),
    DlRedis(RedisLockHandle),
    DlPostgres(PostgresLockHandle),
}

impl Contender {
    /// Waits for `name` and returns it held.
    pub async fn lock(&self, name: &str) -> Held {
        match self {
            Contender::Lockward(store) => {
                let opts = LockOptions::new()
                    .ttl(TTL)
                    .renewal(Renewal::Off)
                    .wait(Duration::from_secs(60));
                Held::Lockward(store.acquire(name, &opts).await.expect("lockward acquire"))
            }
            Contender::Rslock(m) => {
                let lock = m
                    .acquire_no_guard(name.as_bytes(), TTL)
                    .await
                    .expect("rslock acquire");
                Held::Rslock(m.clone(), lock)
            }
            Contender::DlRedis(p) => {
                let lock = p.create_lock(name);
                loop {
                    if let Some(h) = lock
                        .try_acquire()
                        .await
                        .expect("distributed-lock redis acquire")
                    {
                        return Held::DlRedis(h);
                    }
                    tokio::time::sleep(DL_REDIS_RETRY).await;
                }
            }
            Contender::DlPostgres(p) => {
                let lock = p.create_lock(name);
                Held::DlPostgres(
                    lock.acquire(None)
                        .await
                        .expect("distributed-lock postgres acquire"),
                )
            }
        }
    }
}

impl Held {
    pub async fn release(self) {
        match self {
            Held::Lockward(g) => g.release().await.expect("lockward release"),
            Held::Rslock(m, lock) => m.unlock(&lock).await,
            Held::DlRedis(h) => h.release().await.expect("distributed-lock redis release"),
            Held::DlPostgres(h) => h
                .release()
                .await
                .expect("distributed-lock postgres release"),
        }
    }
}
