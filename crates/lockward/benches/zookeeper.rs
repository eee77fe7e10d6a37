//! ZooKeeper figures, measured in one run against the store's own floor: a
//! plain create+delete of an ephemeral node with the same client library.
//!
//! `cargo bench -p lockward --features zookeeper --bench zookeeper`
//!
//! - acquire+release cycle latency p50/p99, as a ratio to create+delete's
//!   (a try-acquire is create + list children; a release is a delete);
//! - handoff latency from the start of a release at a random moment to the
//!   next waiter's acquire;
//! - watch events per release with 200 waiters, counted by the server.

use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Store};
use lockward_testkit::ZookeeperEnsemble;
use zookeeper_client::{Acls, Client, CreateMode};

mod common;
use common::percentile;

#[tokio::main]
async fn main() {
    let zk = ZookeeperEnsemble::start_single();
    let client = Client::connect(&zk.endpoints()[0]).await.unwrap();
    let store = Store::open(&zk.url()).await.unwrap();
    let opts = LockOptions::new()
        .ttl(Duration::from_secs(10))
        .renewal(Renewal::Off);
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());

    let mut floors = Vec::new();
    let mut cycles = Vec::new();
    // Alternate, so both see the same machine.
    for round in 0..1_000 {
        if round % 2 == 0 {
            let began = Instant::now();
            client.create("/floor", b"", &ephemeral).await.unwrap();
            client.delete("/floor", None).await.unwrap();
            floors.push(began.elapsed());
        } else {
            let began = Instant::now();
            store
                .try_acquire("bench", &opts)
                .await
                .unwrap()
                .release()
                .await
                .unwrap();
            cycles.push(began.elapsed());
        }
    }
    let (f50, f99) = (percentile(floors.clone(), 0.5), percentile(floors, 0.99));
    let (c50, c99) = (percentile(cycles.clone(), 0.5), percentile(cycles, 0.99));
    println!(
        "ZooKeeper {} (standalone), one run on this machine",
        zk.endpoints()[0]
    );
    println!("create+delete:           p50 {f50:?}  p99 {f99:?}");
    println!(
        "acquire+release cycle:   p50 {c50:?}  p99 {c99:?}  ({:.2}x / {:.2}x create+delete)",
        c50.as_secs_f64() / f50.as_secs_f64(),
        c99.as_secs_f64() / f99.as_secs_f64()
    );

    let handoffs = common::handoffs(&store, &opts, 200, Duration::from_millis(2)).await;
    let h50 = percentile(handoffs.clone(), 0.5);
    println!(
        "handoff:                 p50 {h50:?}  p99 {:?}  ({:.2}x create+delete)",
        percentile(handoffs, 0.99),
        h50.as_secs_f64() / f50.as_secs_f64()
    );

    // 200 waiters, each on its own session: the server's watch count drops
    // by exactly the watches a release fired.
    let holder = store.try_acquire("herd", &opts).await.unwrap();
    let (counted, counted_rx) = tokio::sync::watch::channel(false);
    let mut waiters = Vec::new();
    for _ in 0..200 {
        let store = Store::open(&zk.url()).await.unwrap();
        let opts = opts.clone().wait(Duration::from_secs(60));
        let mut counted = counted_rx.clone();
        waiters.push(tokio::spawn(async move {
            let guard = store.acquire("herd", &opts).await.unwrap();
            // The first to get it stays until the bench has counted.
            let _ = counted.wait_for(|done| *done).await;
            guard.release().await.unwrap();
        }));
    }
    let until = Instant::now() + Duration::from_secs(30);
    while zk.watch_count(0) != Some(200) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = zk.watch_count(0).unwrap_or(0);
    holder.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let after = zk.watch_count(0).unwrap_or(0);
    println!(
        "watch events per release: {} with 200 waiters ({before} watches before, {after} after)",
        before - after
    );
    counted.send_replace(true);
    for w in waiters {
        w.await.unwrap();
    }
}
