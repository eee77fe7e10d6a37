//! PostgreSQL figures, in one run against the store's floor: `SELECT 1`
//! round trips with the same client library, alternating.
//!
//! `cargo bench -p lockward --features postgres --bench postgres`

use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Store};
use lockward_testkit::PostgresServer;

const RUN_FOR: Duration = Duration::from_secs(2);

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

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
    for (mode, url) in [("lease", server.url()), ("advisory", format!("{}?mode=advisory", server.url()))] {
        let store = Store::open(&url).await.unwrap();
        let opts = LockOptions::new().renewal(Renewal::Off);
        let until = Instant::now() + RUN_FOR;
        let mut n = 0u64;
        while Instant::now() < until {
            store.try_acquire("bench", &opts).await.unwrap().release().await.unwrap();
            n += 1;
        }
        let cycles = n as f64 / RUN_FOR.as_secs_f64();
        let mut handoffs = Vec::new();
        for _ in 0..100 {
            let holder = store.try_acquire("handoff", &opts).await.unwrap();
            let (s, o) = (store.clone(), opts.clone());
            let waiter = tokio::spawn(async move {
                let g = s.acquire("handoff", &o).await.unwrap();
                let at = Instant::now();
                g.release().await.unwrap();
                at
            });
            tokio::time::sleep(Duration::from_micros(2_000 + fastrand::u64(0..8_000))).await;
            let released = Instant::now();
            holder.release().await.unwrap();
            handoffs.push(waiter.await.unwrap().saturating_duration_since(released));
        }
        println!(
            "mode={mode:<8}: {cycles:>8.0} acquire+release cycles/s ({:.2} of floor/2); handoff p50 {:?}",
            cycles / (floor / 2.0),
            median(handoffs)
        );
    }
}
