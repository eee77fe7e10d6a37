//! Redis at scale: server memory per held lock with 1,000,000 locks held on
//! distinct names, against the same number of bare `SET key token NX PX`
//! keys on the same server in the same run (target: within 1.5×), and
//! acquire throughput while they are held.
//!
//! `cargo bench -p lockward --features redis --bench redis_scale`
//! (`LOCKWARD_SCALE=N` for another count.)

use std::time::{Duration, Instant};

use lockward::{LockOptions, Renewal, Store};
use lockward_testkit::RedisServer;

fn used_memory(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "memory"])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("LOCKWARD_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let server = RedisServer::start();
    let url = server.url();
    println!(
        "redis {}, {n} locks on distinct names, one run on this machine",
        server.addr()
    );

    // Bare keys first, with redis-benchmark's own pipelined SET NX PX.
    let before = used_memory(&server);
    let port = server.port().to_string();
    let status = std::process::Command::new("redis-benchmark")
        .args([
            "-p",
            &port,
            "-n",
            &n.to_string(),
            "-r",
            &n.to_string(),
            "-P",
            "64",
            "-q",
        ])
        .args([
            "SET",
            "bare:__rand_int__",
            "0123456789abcdef0123456789abcdef",
            "NX",
            "PX",
            "600000",
        ])
        .output()
        .expect("redis-benchmark");
    assert!(status.status.success());
    let bare_keys: u64 = server.cli(&["DBSIZE"]).trim().parse().unwrap();
    let bare = (used_memory(&server) - before) as f64 / bare_keys as f64;
    server.cli(&["FLUSHALL"]);

    // lockward's locks: 32 tasks, each with its own handle.
    let before = used_memory(&server);
    let opts = LockOptions::new()
        .ttl(Duration::from_secs(600))
        .renewal(Renewal::Off);
    let began = Instant::now();
    let mut tasks = Vec::new();
    let per = n / 32;
    for t in 0..32 {
        let store = Store::open(&url).await.unwrap();
        let opts = opts.clone();
        tasks.push(tokio::spawn(async move {
            let mut guards = Vec::with_capacity(per);
            for i in 0..per {
                guards.push(
                    store
                        .try_acquire(format!("scale/{t}/{i}"), &opts)
                        .await
                        .unwrap(),
                );
            }
            guards
        }));
    }
    let mut held = Vec::new();
    for t in tasks {
        held.extend(t.await.unwrap());
    }
    let took = began.elapsed();
    let per_lock = (used_memory(&server) - before) as f64 / held.len() as f64;
    println!(
        "bare SET NX PX key: {bare:.0} B; lockward lock: {per_lock:.0} B ({:.2}x; target <= 1.5x): \
         the lock key plus its never-expiring fence counter",
        per_lock / bare
    );
    println!(
        "taking {} locks: {:.0} acquisitions/s with 32 clients",
        held.len(),
        held.len() as f64 / took.as_secs_f64()
    );
    // Throughput on fresh names while the million are held.
    let store = Store::open(&url).await.unwrap();
    let until = Instant::now() + Duration::from_secs(3);
    let mut cycles = 0u64;
    while Instant::now() < until {
        store
            .try_acquire("scale/fresh", &opts)
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        cycles += 1;
    }
    println!(
        "uncontended cycles/s while they are held: {:.0}",
        cycles as f64 / 3.0
    );
    // Exit without releasing a million locks one by one; the server goes.
    std::mem::forget(held);
}
