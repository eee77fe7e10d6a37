//! PostgreSQL figures, in one run against the store's floor: `SELECT 1`
//! round trips with the same client library, alternating.
//!
//! `cargo bench -p lockward --features postgres --bench postgres`

use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Store};
use lockward_testkit::PostgresServer;

mod common;

const RUN_FOR: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() {
    let server = PostgresServer::start();
    let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let select = client.prepare("SELECT 1").await.unwrap();
    let until = Instant::now() + RUN_FOR;
    let mut n = 0u64;
    while Instant::now() < until {
        client.query_one(&select, &[]).await.unwrap();
        n += 1;
    }
    let floor = n as f64 / RUN_FOR.as_secs_f64();
    println!("postgres {}, one run on this machine", server.addr());
    println!("SELECT 1 round trips: {floor:>8.0}/s (the floor; a cycle is at least two)");
    for (mode, url) in [
        ("lease", server.url()),
        ("advisory", format!("{}?mode=advisory", server.url())),
    ] {
        let store = Store::open(&url).await.unwrap();
        let opts = LockOptions::new().renewal(Renewal::Off);
        let cycles = common::cycles_per_s(&store, &opts, RUN_FOR).await;
        let handoffs = common::handoffs(&store, &opts, 100, Duration::from_millis(2)).await;
        println!(
            "mode={mode:<8}: {cycles:>8.0} acquire+release cycles/s ({:.2} of floor/2); handoff p50 {:?}",
            cycles / (floor / 2.0),
            common::percentile(handoffs, 0.5)
        );
    }
}
