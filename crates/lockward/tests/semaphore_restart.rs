//! A permit granted just before its store's server is killed (kill -9)
//! and restarted still counts, on every store that keeps what it
//! acknowledged: the restarted server admits nobody past the permits. (A
//! Redis that keeps nothing frees every permit by design: see
//! `lockward-chaos`'s `tests/semaphore_restart.rs` and docs/capabilities.md.)

use std::time::{Duration, Instant};

use lockward::recipe::{Permit, Semaphore};
use lockward::{Error, LockOptions};
use lockward_testkit::{EtcdCluster, MariadbServer, PostgresServer, ZookeeperEnsemble};

fn opts() -> LockOptions {
    LockOptions::new().ttl(Duration::from_secs(30))
}

async fn semaphore(url: &str) -> Semaphore {
    let store = lockward::Store::open(url).await.expect("open the store");
    Semaphore::new(store, "restarted-sem", 2).unwrap()
}

/// A try once the restarted server answers again (a refusal is an
/// answer): the store may be unavailable for a moment.
async fn try_once_back(sem: &Semaphore) -> Result<Permit, Error> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        match sem.try_acquire(&opts()).await {
            Err(Error::Unavailable { .. } | Error::TimedOut { .. }) if Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            other => return other,
        }
    }
}

/// Takes one permit of two, restarts the server with `restart`, and checks
/// that one permit is left, not two.
async fn the_permit_outlives_a_restart(url: &str, restart: impl FnOnce()) {
    let first = semaphore(url)
        .await
        .try_acquire(&opts())
        .await
        .expect("a permit");
    tokio::task::block_in_place(restart);
    let sem = semaphore(url).await;
    let second = try_once_back(&sem).await.expect("the permit left");
    let third = try_once_back(&sem).await;
    assert!(
        matches!(&third, Err(Error::NoPermits { why, .. }) if why == "1 wanted, 0 of 2 free"),
        "{url}: a third holder of two permits after a restart: {third:?}"
    );
    assert!(second.guard().fence() > first.guard().fence());
    assert!(!first.guard().is_lost(), "{url}: the first permit was lost");
    second.release().await.unwrap();
    first.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let mut server = PostgresServer::start_durable();
    let url = server.url();
    the_permit_outlives_a_restart(&url, || server.restart()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb() {
    let mut server = MariadbServer::start_durable();
    let url = server.url();
    the_permit_outlives_a_restart(&url, || server.restart()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd() {
    let mut cluster = EtcdCluster::start_three();
    let url = cluster.url();
    the_permit_outlives_a_restart(&url, || {
        let leader = cluster.leader().expect("a leader");
        cluster.kill9(leader);
        cluster.restart(leader);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper() {
    let mut ensemble = ZookeeperEnsemble::start_three();
    let url = ensemble.url();
    the_permit_outlives_a_restart(&url, || {
        let leader = ensemble.leader().expect("a leader");
        ensemble.kill9(leader);
        ensemble.restart(leader);
    })
    .await;
}
