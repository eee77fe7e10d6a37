//! etcd figures, measured in one run against the store's own floor: a plain
//! put round trip with the same client library.
//!
//! `cargo bench -p lockward --features etcd --bench etcd`
//!
//! - acquire+release cycle latency p50/p99, as a ratio to a put's;
//! - handoff latency from the start of a release at a random moment to the
//!   next waiter's acquire (target: under two put round trips).

use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Store};
use lockward_testkit::EtcdCluster;

mod common;
use common::percentile;

#[tokio::main]
async fn main() {
    let etcd = EtcdCluster::start_single();
    let endpoint = format!("http://{}", etcd.endpoints()[0]);
    let mut client = etcd_client::Client::connect([endpoint], None)
        .await
        .unwrap();
    let store = Store::open(&etcd.url()).await.unwrap();
    let opts = LockOptions::new()
        .ttl(Duration::from_secs(10))
        .renewal(Renewal::Off);

    let mut puts = Vec::new();
    let mut cycles = Vec::new();
    // Alternate, so both see the same machine.
    for round in 0..400 {
        if round % 2 == 0 {
            let began = Instant::now();
            client.put("bench/floor", "v", None).await.unwrap();
            puts.push(began.elapsed());
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
    let (put50, put99) = (percentile(puts.clone(), 0.5), percentile(puts, 0.99));
    let (c50, c99) = (percentile(cycles.clone(), 0.5), percentile(cycles, 0.99));
    println!(
        "etcd {} (one member), one run on this machine",
        etcd.endpoints()[0]
    );
    println!("put round trip:          p50 {put50:?}  p99 {put99:?}");
    println!(
        "acquire+release cycle:   p50 {c50:?}  p99 {c99:?}  ({:.1}x / {:.1}x a put; a cycle is grant + txn + revoke)",
        c50.as_secs_f64() / put50.as_secs_f64(),
        c99.as_secs_f64() / put99.as_secs_f64()
    );

    let handoffs = common::handoffs(&store, &opts, 100, Duration::from_millis(2)).await;
    let h50 = percentile(handoffs.clone(), 0.5);
    println!(
        "handoff:                 p50 {h50:?}  p99 {:?}  ({:.1} put round trips; target < 2)",
        percentile(handoffs, 0.99),
        h50.as_secs_f64() / put50.as_secs_f64()
    );
}
