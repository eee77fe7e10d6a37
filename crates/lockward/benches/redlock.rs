//! Redlock figures, measured in one run on the same masters: uncontended
//! acquire+release cycles/s over 5 masters against one Redis (`redis://`,
//! the same server as master 1), as a ratio, and handoff p50.
//!
//! The same masters beside the `rslock` and `distributed-lock` crates:
//! `cargo bench -p lockward-compare` (in `crates/lockward-compare`).
//!
//! `cargo bench -p lockward --features redis --bench redlock`

use std::time::Duration;

use lockward::{LockOptions, Renewal, Store};
use lockward_testkit::{RedisMasters, RedisOptions};

mod common;

const RUN_FOR: Duration = Duration::from_secs(2);
const TTL: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() {
    let masters = RedisMasters::start(5, RedisOptions::default());
    let redlock = Store::open(&masters.url()).await.unwrap();
    let first = masters
        .url()
        .trim_start_matches("redlock://")
        .split(',')
        .next()
        .unwrap()
        .to_string();
    let single = Store::open(&format!("redis://{first}")).await.unwrap();
    let opts = LockOptions::new().ttl(TTL).renewal(Renewal::Off);

    let (mut five, mut one) = (0.0f64, 0.0f64);
    for _ in 0..2 {
        five = five.max(common::cycles_per_s(&redlock, &opts, RUN_FOR).await);
        one = one.max(common::cycles_per_s(&single, &opts, RUN_FOR).await);
    }
    println!("uncontended, one client (best of 2 alternating runs):");
    println!("  lockward redlock://x5  {five:>8.0} cycles/s");
    println!(
        "  lockward redis://x1    {one:>8.0} cycles/s   (5 masters / 1 = {:.2})",
        five / one
    );
    let handoff = common::percentile(
        common::handoffs(&redlock, &opts, 60, Duration::from_millis(1)).await,
        0.5,
    );
    println!("handoff p50 over 5 masters: {handoff:?}");
}
