//! `lockward bench` on every store, one after the other on this machine,
//! each on a server the testkit starts: writes `docs/benchmarks/STORE.svg`
//! and `STORE.json` and prints one Markdown row per store for
//! docs/benchmarks.md.
//!
//! `cargo bench -p lockward-cli --bench every_store`
//! (`LOCKWARD_BENCH_DURATION=3s` per measurement, `LOCKWARD_BENCH_ONLY=redis`
//! for one store, `LOCKWARD_BENCH_ARGS="--names same --scale 0"` for other
//! `lockward bench` arguments in place of `--scale N`, and
//! `LOCKWARD_BENCH_OUT=DIR` to write elsewhere than docs/benchmarks.)

use std::path::Path;
use std::process::Command;

use lockward_testkit::{
    EtcdCluster, KubeApiServer, MariadbServer, PostgresServer, RedisCluster, RedisMasters,
    RedisOptions, RedisServer, ZookeeperEnsemble,
};
use serde_json::Value;

fn main() {
    let duration = std::env::var("LOCKWARD_BENCH_DURATION").unwrap_or_else(|_| "3s".into());
    let only = std::env::var("LOCKWARD_BENCH_ONLY").ok();
    let extra: Option<Vec<String>> = std::env::var("LOCKWARD_BENCH_ARGS")
        .ok()
        .map(|a| a.split_whitespace().map(str::to_string).collect());
    let out = std::env::var("LOCKWARD_BENCH_OUT").map_or_else(
        |_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks"),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&out).expect("docs/benchmarks");
    let dir = tempfile::tempdir().expect("temp dir");
    let wanted = |label: &str| only.as_deref().is_none_or(|o| o == label);

    let mut rows = Vec::new();
    let mut bench = |label: &str, url: String, scale: usize| {
        if !wanted(label) {
            return;
        }
        // The address as lockward prints it: never the password.
        let shown =
            lockward::StoreUrl::parse(&url).map_or_else(|e| e.to_string(), |u| u.to_string());
        eprintln!("bench {label} on {shown}");
        let svg = out.join(format!("{label}.svg"));
        let scale = vec!["--scale".to_string(), scale.to_string()];
        let run = Command::new(env!("CARGO_BIN_EXE_lockward"))
            .args(["--store", &url, "bench", "--json", "--duration", &duration])
            .args(extra.as_ref().unwrap_or(&scale))
            .arg("--svg")
            .arg(&svg)
            .output()
            .expect("lockward bench");
        assert!(
            run.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let report: Value = serde_json::from_slice(&run.stdout).expect("bench JSON");
        std::fs::write(
            out.join(format!("{label}.json")),
            serde_json::to_string_pretty(&report).expect("JSON"),
        )
        .expect("write JSON");
        rows.push(row(label, &report));
    };

    bench(
        "sqlite",
        format!("sqlite://{}", dir.path().join("bench.db").display()),
        10_000,
    );
    if wanted("redis") {
        let redis = RedisServer::start();
        bench("redis", redis.url(), 1_000_000);
    }
    if only.as_deref() == Some("redis-cluster") {
        // On request only: three primaries on these two cores.
        let cluster = RedisCluster::start();
        bench("redis-cluster", cluster.url(), 10_000);
    }
    if wanted("redlock") {
        let masters = RedisMasters::start(5, RedisOptions::default());
        bench("redlock", masters.url(), 100_000);
    }
    if wanted("etcd") {
        let etcd = EtcdCluster::start_single();
        bench("etcd", etcd.url(), 10_000);
    }
    if wanted("zookeeper") {
        let zk = ZookeeperEnsemble::start_single();
        // A kill -9 failover waits out the dead leader's session.
        bench(
            "zookeeper",
            format!("{}?session_timeout=2s", zk.url()),
            10_000,
        );
    }
    if wanted("postgres") || wanted("postgres-advisory") {
        let pg = PostgresServer::start_durable();
        bench("postgres", pg.url(), 10_000);
        bench(
            "postgres-advisory",
            format!("{}?mode=advisory", pg.url()),
            10_000,
        );
    }
    if wanted("mysql") || wanted("mysql-named") {
        let db = MariadbServer::start_durable();
        bench("mysql", db.url(), 10_000);
        bench("mysql-named", format!("{}?mode=named", db.url()), 10_000);
    }
    if wanted("k8s") {
        let kube = KubeApiServer::start();
        bench("k8s", kube.url(), 10_000);
    }
    println!("| store | floor µs | p50 µs | p99 µs | p99.9 µs | cycles/s | of floor | handoff p50 µs | 16 clients one / distinct | 256 clients one / distinct | held locks | bytes/lock | kill -9 / resign failover ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}

/// One Markdown row from a bench report.
fn row(label: &str, r: &Value) -> String {
    let f = |v: &Value, digits: usize| {
        v.as_f64()
            .map_or("–".to_string(), |x| format!("{x:.digits$}"))
    };
    let clients = |n: u64| {
        let by = |names: &str| {
            r["throughput"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["clients"] == n && t["names"] == names)
                .map_or("–".to_string(), |t| f(&t["cycles_per_s"], 0))
        };
        format!("{} / {}", by("same"), by("distinct"))
    };
    let scale = &r["scale"];
    let bytes = match (
        scale["bytes_per_lock"].as_f64(),
        scale["ratio_to_bare_key"].as_f64(),
    ) {
        (Some(b), Some(k)) => format!("{b:.0} ({k:.2}× bare key)"),
        (Some(b), None) => format!("{b:.0} ({})", scale["measured"].as_str().unwrap_or("")),
        _ => "–".into(),
    };
    let failover = &r["failover"];
    format!(
        "| {label} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {bytes} | {} / {} |",
        f(&r["floor_rtt_us"], 0),
        f(&r["p50_us"], 0),
        f(&r["p99_us"], 0),
        f(&r["p999_us"], 0),
        f(&r["cycles_per_s"], 0),
        f(&r["ratio_to_floor"], 2),
        f(&r["handoff_p50_us"], 0),
        clients(16),
        clients(256),
        scale["locks"]
            .as_u64()
            .map_or("–".into(), |n| n.to_string()),
        f(&failover["after_kill_ms"], 0),
        f(&failover["after_resign_ms"], 1),
    )
}
