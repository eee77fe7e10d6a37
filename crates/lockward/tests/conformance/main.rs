//! The conformance suite: one set of checks, instantiated for every backend.
//! Each backend module provides a fixture (how to open a store on it) and
//! registers the checks its declared capabilities call for; libtest-mimic
//! runs them as `BACKEND::CHECK` tests (filter by name as with `cargo test`).

mod resources;
mod suite;

#[cfg(feature = "etcd")]
mod etcd;
#[cfg(feature = "kubernetes")]
mod kubernetes;
mod memory;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod redis_cluster;
#[cfg(feature = "redis")]
mod redis_sentinel;
#[cfg(feature = "redis")]
mod redlock;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "zookeeper")]
mod zookeeper;

fn main() {
    if let Ok(spec) = std::env::var(suite::WAITER_ENV) {
        return suite::run_waiter(&spec);
    }
    let args = libtest_mimic::Arguments::from_args();
    let mut trials = Vec::new();
    #[cfg(feature = "etcd")]
    etcd::register(&mut trials);
    #[cfg(feature = "kubernetes")]
    kubernetes::register(&mut trials);
    memory::register(&mut trials);
    #[cfg(feature = "postgres")]
    postgres::register(&mut trials);
    #[cfg(feature = "mysql")]
    mysql::register(&mut trials);
    #[cfg(feature = "redis")]
    redis::register(&mut trials);
    #[cfg(feature = "redis")]
    redis_cluster::register(&mut trials);
    #[cfg(feature = "redis")]
    redis_sentinel::register(&mut trials);
    #[cfg(feature = "redis")]
    redlock::register(&mut trials);
    #[cfg(feature = "sqlite")]
    sqlite::register(&mut trials);
    #[cfg(feature = "zookeeper")]
    zookeeper::register(&mut trials);
    libtest_mimic::run(&args, trials).exit();
}
