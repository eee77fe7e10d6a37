//! lockward beside `rslock` and `distributed-lock`, against the same Redis
//! and the same PostgreSQL in one run, rounds alternating between crates:
//!
//! - uncontended acquire+release: cycles/s and p50, and the floor (two round
//!   trips of the server's cheapest command) over the p50;
//! - 8 clients on one name: cycles/s;
//! - handoff p50: from a release at a random moment to a waiting client's
//!   acquire (each crate waits its own way: lockward is woken by the server,
//!   rslock retries after up to 200 ms, distributed-lock's Redis lock is
//!   retried every 10 ms, its PostgreSQL lock waits in the server).
//!
//! Targets on Redis (one server, and Redlock over 5 masters): lockward ≥
//! 1.5× the others' uncontended throughput, ≥ 20× faster handoff than
//! polling crates, ≥ 0.8 of the floor (one master's, for Redlock).
//!
//! `cargo bench -p lockward-compare` (`LOCKWARD_COMPARE_SECS=N` per round).

mod contender;

use std::sync::Arc;
use std::time::{Duration, Instant};

use contender::{Contender, Kind};
use lockward::StoreUrl;
use lockward_bench::{floor, Latencies};
use lockward_testkit::{PostgresServer, RedisMasters, RedisOptions, RedisServer};

const ROUNDS: usize = 3;
const CONTENDERS: usize = 8;
const HANDOFFS: usize = 40;

/// One crate's figures, best of the rounds.
#[derive(Default)]
struct Figures {
    cycles_per_s: f64,
    cycle: Latencies,
    contended_per_s: f64,
    /// Acquisitions of the client that got the fewest, and the most.
    contended_spread: (u64, u64),
    handoff: Latencies,
}

#[tokio::main]
async fn main() {
    let secs = std::env::var("LOCKWARD_COMPARE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let run_for = Duration::from_secs(secs);
    let redis = RedisServer::start();
    let postgres = PostgresServer::start();
    let redis_url = redis.url();
    let pg_url = postgres.url();
    println!("one run on this machine, {ROUNDS} alternating rounds of {run_for:?} per figure");
    compare(
        "Redis",
        &redis_url,
        &[
            Kind::Lockward(redis_url.clone()),
            Kind::Rslock(vec![redis_url.clone()]),
            Kind::DistributedLockRedis(vec![redis_url.clone()]),
        ],
        run_for,
    )
    .await;
    let masters = RedisMasters::start(5, RedisOptions::default());
    let each: Vec<String> = masters
        .url()
        .trim_start_matches("redlock://")
        .split(',')
        .map(|a| format!("redis://{a}"))
        .collect();
    compare(
        "Redlock, 5 masters",
        &masters.url(),
        &[
            Kind::Lockward(masters.url()),
            Kind::Rslock(each.clone()),
            Kind::DistributedLockRedis(each),
        ],
        run_for,
    )
    .await;
    compare(
        "PostgreSQL",
        &pg_url,
        &[
            Kind::Lockward(pg_url.clone()),
            Kind::Lockward(format!("{pg_url}?mode=advisory")),
            Kind::DistributedLockPostgres(pg_url.clone()),
        ],
        run_for,
    )
    .await;
}

async fn compare(server: &str, url: &str, kinds: &[Kind], run_for: Duration) {
    let parsed = StoreUrl::parse(url).expect("url");
    // Measured before every contender's turn, so it sees the same machine.
    let mut floors = Latencies::new();
    let mut figures: Vec<Figures> = kinds.iter().map(|_| Figures::default()).collect();
    for round in 0..ROUNDS {
        for (kind, f) in kinds.iter().zip(figures.iter_mut()) {
            floors.record(floor(&parsed, 200).await.expect("floor"));
            let name = format!("compare/{round}");
            let (per_s, cycle) = cycles(kind, &name, run_for).await;
            if per_s > f.cycles_per_s {
                (f.cycles_per_s, f.cycle) = (per_s, cycle);
            }
            let (per_s, spread) = contended(kind, &name, run_for).await;
            if per_s > f.contended_per_s {
                (f.contended_per_s, f.contended_spread) = (per_s, spread);
            }
            f.handoff
                .merge(&handoffs(kind, &name, HANDOFFS / ROUNDS).await);
        }
    }
    let floor = floors.quantile(0.5);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "\n{server} (floor: one round trip of the cheapest command, median of {} turns: {:.0} µs)",
        floors.len(),
        us(floor)
    );
    println!(
        "  {:<26} {:>10} {:>9} {:>9} {:>12} {:>15} {:>11}",
        "", "cycles/s", "p50 µs", "of floor", "8 clients/s", "fewest–most", "handoff p50"
    );
    for (kind, f) in kinds.iter().zip(&figures) {
        let p50 = f.cycle.quantile(0.5);
        println!(
            "  {:<26} {:>10.0} {:>9.0} {:>9.2} {:>12.0} {:>15} {:>8.2} ms",
            kind.label(),
            f.cycles_per_s,
            us(p50),
            2.0 * us(floor) / us(p50),
            f.contended_per_s,
            format!("{}–{}", f.contended_spread.0, f.contended_spread.1),
            f.handoff.quantile(0.5).as_secs_f64() * 1e3
        );
    }
    let ours = &figures[0];
    for (kind, f) in kinds.iter().zip(&figures).skip(1) {
        let throughput = ours.cycles_per_s / f.cycles_per_s;
        let handoff =
            f.handoff.quantile(0.5).as_secs_f64() / ours.handoff.quantile(0.5).as_secs_f64();
        let mut line = format!(
            "  {} / {}: uncontended {throughput:.2}×, 8 clients {:.2}×, handoff {handoff:.1}× faster",
            kinds[0].label(),
            kind.label(),
            ours.contended_per_s / f.contended_per_s,
        );
        if server.starts_with("Red") {
            line += &format!(
                " (targets: ≥ 1.5× {}, {})",
                verdict(throughput >= 1.5),
                if kind.polls() {
                    format!("≥ 20× handoff {}", verdict(handoff >= 20.0))
                } else {
                    "no handoff target: it does not poll".into()
                }
            );
        }
        println!("{line}");
    }
    if server.starts_with("Red") {
        let of_floor = 2.0 * us(floor) / us(ours.cycle.quantile(0.5));
        println!(
            "  {} of the floor: {of_floor:.2} (target ≥ 0.8: {})",
            kinds[0].label(),
            verdict(of_floor >= 0.8)
        );
    }
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "missed"
    }
}

/// Uncontended cycles on one client: per second, and each cycle's latency.
async fn cycles(kind: &Kind, name: &str, run_for: Duration) -> (f64, Latencies) {
    let client = kind.open().await;
    let mut latencies = Latencies::new();
    let until = Instant::now() + run_for;
    while Instant::now() < until {
        let began = Instant::now();
        client.lock(&format!("{name}/cycle")).await.release().await;
        latencies.record(began.elapsed());
    }
    (latencies.len() as f64 / run_for.as_secs_f64(), latencies)
}

/// `CONTENDERS` clients, each with its own connection, on one name: cycles
/// per second, and the fewest and most any one client got.
async fn contended(kind: &Kind, name: &str, run_for: Duration) -> (f64, (u64, u64)) {
    let until = Instant::now() + run_for;
    let mut tasks = Vec::new();
    for _ in 0..CONTENDERS {
        let client = kind.open().await;
        let name = format!("{name}/contended");
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                client.lock(&name).await.release().await;
                n += 1;
            }
            n
        }));
    }
    let mut counts = Vec::new();
    for t in tasks {
        counts.push(t.await.expect("contender"));
    }
    let spread = (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    );
    (
        counts.iter().sum::<u64>() as f64 / run_for.as_secs_f64(),
        spread,
    )
}

/// A holder on one client releases at a random moment while another client
/// waits; each sample runs from the release to the waiter's acquire.
async fn handoffs(kind: &Kind, name: &str, samples: usize) -> Latencies {
    let holder = kind.open().await;
    let waiter: Arc<Contender> = Arc::new(kind.open().await);
    let name = format!("{name}/handoff");
    let mut out = Latencies::new();
    for _ in 0..samples {
        let held = holder.lock(&name).await;
        let (w, n) = (waiter.clone(), name.clone());
        let waiting = tokio::spawn(async move {
            let h = w.lock(&n).await;
            let at = Instant::now();
            h.release().await;
            at
        });
        tokio::time::sleep(Duration::from_micros(2_000 + fastrand::u64(0..8_000))).await;
        let released = Instant::now();
        held.release().await;
        out.record(
            waiting
                .await
                .expect("waiter")
                .saturating_duration_since(released),
        );
    }
    out
}
