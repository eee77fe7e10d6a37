//! `lockward bench`: the store's figures, each beside the store's own floor
//! measured in the same run.

use std::io::Write;
use std::time::Duration;

use lockward::bench::{self, quantile, Throughput};
use lockward::{Store, StoreUrl};

use crate::exit;

/// What `bench` was asked to measure.
pub struct BenchArgs {
    pub clients: Vec<usize>,
    pub names: String,
    pub duration: Duration,
    pub json: bool,
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One line of progress on stderr, replaced by the next.
fn progress(step: usize, steps: usize, what: &str) {
    let done = step * 20 / steps.max(1);
    eprint!(
        "\r[{}{}] {what:<40}",
        "#".repeat(done),
        ".".repeat(20 - done)
    );
    let _ = std::io::stderr().flush();
}

pub async fn bench(store: &Store, url: &str, args: BenchArgs) -> u8 {
    let parsed = match StoreUrl::parse(url) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::USAGE;
        }
    };
    let same = match args.names.as_str() {
        "same" => vec![true],
        "distinct" => vec![false],
        "both" => vec![true, false],
        other => {
            eprintln!("lockward: --names {other:?}: use same, distinct or both");
            return exit::USAGE;
        }
    };
    let prefix = format!("lockward-bench/{:x}", fastrand::u64(..));
    let steps = 3 + args.clients.len() * same.len();
    progress(0, steps, "the store's floor");
    let floor = bench::floor(&parsed, 200).await;
    progress(1, steps, "uncontended cycles");
    let cycles = match bench::cycles(store, &format!("{prefix}/cycle"), args.duration).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("\nlockward: {e}");
            return exit::for_error(&e);
        }
    };
    progress(2, steps, "handoff");
    let other = match Store::open(url).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("\nlockward: {e}");
            return exit::for_error(&e);
        }
    };
    let handoffs = bench::handoffs(store, &other, &format!("{prefix}/handoff"), 100)
        .await
        .unwrap_or_default();
    let mut runs: Vec<Throughput> = Vec::new();
    let mut step = 3;
    for &n in &args.clients {
        for &same_name in &same {
            progress(
                step,
                steps,
                &format!(
                    "{n} clients, {} names",
                    if same_name { "one" } else { "distinct" }
                ),
            );
            step += 1;
            let opened =
                bench::throughput(|| Store::open(url), &prefix, n, same_name, args.duration).await;
            match opened {
                Ok(t) => runs.push(t),
                Err(e) => eprintln!("\nlockward: {n} clients: {e}"),
            }
        }
    }
    eprintln!("\r{:<64}", "");
    let p50 = quantile(&cycles, 0.5);
    let cycles_per_s = cycles.len() as f64 / args.duration.as_secs_f64();
    let ratio = floor.map(|f| us(f) / us(p50));
    let h50 = quantile(&handoffs, 0.5);
    if args.json {
        let throughput: Vec<serde_json::Value> = runs
            .iter()
            .map(|t| {
                serde_json::json!({
                    "clients": t.clients,
                    "names": if t.same_name { "same" } else { "distinct" },
                    "cycles_per_s": t.cycles_per_s,
                    "fewest_per_client": t.fewest,
                    "most_per_client": t.most,
                    "longest_wait_us": us(t.longest_wait),
                })
            })
            .collect();
        let report = serde_json::json!({
            "store": store.address(),
            "floor_rtt_us": floor.map(us),
            "cycles_per_s": cycles_per_s,
            "p50_us": us(p50),
            "p99_us": us(quantile(&cycles, 0.99)),
            "p999_us": us(quantile(&cycles, 0.999)),
            "handoff_p50_us": us(h50),
            "handoff_p99_us": us(quantile(&handoffs, 0.99)),
            "ratio_to_floor": ratio,
            "throughput": throughput,
        });
        println!("{report}");
        return 0;
    }
    println!(
        "lockward bench on {} ({:?} per measurement)",
        store.address(),
        args.duration
    );
    match floor {
        Some(f) => println!(
            "floor (one round trip of the cheapest write)   {:>10.1} µs",
            us(f)
        ),
        None => println!("floor                                           (embedded store: none)"),
    }
    println!(
        "uncontended acquire+release    p50 {:>9.1} µs  p99 {:>9.1} µs  p99.9 {:>9.1} µs  {:>9.0} cycles/s",
        us(p50),
        us(quantile(&cycles, 0.99)),
        us(quantile(&cycles, 0.999)),
        cycles_per_s
    );
    if let Some(r) = ratio {
        println!("                               floor / cycle = {r:.2} (a cycle is at least two round trips)");
    }
    println!(
        "handoff                        p50 {:>9.1} µs  p99 {:>9.1} µs{}",
        us(h50),
        us(quantile(&handoffs, 0.99)),
        floor.map_or(String::new(), |f| format!(
            "  ({:.1} floor round trips)",
            us(h50) / us(f)
        ))
    );
    for t in &runs {
        println!(
            "{:>4} clients, {:<8} names  {:>9.0} cycles/s  per client {}–{}  longest wait {:?}",
            t.clients,
            if t.same_name { "one" } else { "distinct" },
            t.cycles_per_s,
            t.fewest,
            t.most,
            t.longest_wait
        );
    }
    0
}
