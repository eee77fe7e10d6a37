//! Redis figures, printed as ratios measured in one run against the
//! server's own floor (`redis-benchmark` on `SET NX PX`).
//!
//! `cargo bench -p lockward --features redis --bench redis`
//!
//! - uncontended acquire+release cycles/s, 1 client and 16 clients on
//!   distinct names, against `redis-benchmark` at the same concurrency
//!   divided by two (a cycle is two round trips);
//! - handoff latency p50/p99: from the start of a release at a random
//!   moment to the waiter's successful acquire.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Store};
use lockward_testkit::RedisServer;

mod common;

const RUN_FOR: Duration = Duration::from_secs(3);

#[tokio::main]
async fn main() {
    let server = RedisServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    println!("redis {}, one run on this machine", server.addr());
    let server_pid = server.pid().expect("server running");
    let me = std::process::id();
    for clients in [1, 16] {
        let floor = redis_benchmark(&server, clients);
        let cpu = |pid| lockward_testkit::cpu_time(pid).unwrap_or_default();
        let (server_before, client_before) = (cpu(server_pid), cpu(me));
        let ours = cycles_per_s(&store, clients).await;
        let busy = |before, pid| (cpu(pid) - before).as_secs_f64() / RUN_FOR.as_secs_f64() * 100.0;
        println!(
            "clients {clients:>2}: lockward {ours:>8.0} cycles/s; redis-benchmark SET NX PX {floor:>8.0} req/s; \
             ratio to floor/2 = {:.2} (target >= 0.8); CPU during lockward's run: server {:.0}%, client {:.0}%",
            ours / (floor / 2.0),
            busy(server_before, server_pid),
            busy(client_before, me),
        );
    }
    let samples = common::handoffs(
        &store,
        &LockOptions::new().renewal(Renewal::Off),
        200,
        Duration::from_millis(1),
    )
    .await;
    let (p50, p99) = (
        common::percentile(samples.clone(), 0.5),
        common::percentile(samples, 0.99),
    );
    println!("handoff: p50 {p50:?}, p99 {p99:?} (target p50 < 1 ms; polling clients ~50 ms)");
}

fn redis_benchmark(server: &RedisServer, clients: usize) -> f64 {
    lockward_testkit::require_binary("redis-benchmark");
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args([
            "-c",
            &clients.to_string(),
            "-n",
            "100000",
            "-r",
            "1000000",
            "--csv",
        ])
        .args(["SET", "floor:__rand_int__", "v", "NX", "PX", "10000"])
        .output()
        .expect("run redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    // CSV: "test","rps",… ; the second line holds the figures.
    text.lines()
        .nth(1)
        .and_then(|l| l.split(',').nth(1))
        .and_then(|v| v.trim_matches('"').parse().ok())
        .unwrap_or_else(|| panic!("cannot read redis-benchmark output: {text}"))
}

async fn cycles_per_s(store: &Store, clients: usize) -> f64 {
    let opts = Arc::new(LockOptions::new().renewal(Renewal::Off));
    let until = Instant::now() + RUN_FOR;
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let (store, opts) = (store.clone(), opts.clone());
            tokio::spawn(async move {
                let name = format!("bench/{i}");
                let mut n = 0u64;
                while Instant::now() < until {
                    let g = store.try_acquire(&name, &opts).await.unwrap();
                    g.release().await.unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / RUN_FOR.as_secs_f64()
}
