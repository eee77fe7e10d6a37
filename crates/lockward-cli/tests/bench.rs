//! `lockward bench --json` on every store: every figure is measured, and
//! server stores report their floor and the ratio to it.

mod common;

use std::process::Command;

use common::{every_store, lockward};

#[test]
fn bench_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let every = every_store(dir.path());
    for store in &every.urls {
        let out = Command::new(lockward())
            .args(["--store", store, "bench", "--json"])
            .args(["--duration", "300ms", "--clients", "1,4"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{store}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for field in ["cycles_per_s", "p50_us", "p99_us", "handoff_p50_us"] {
            assert!(r[field].as_f64().unwrap() > 0.0, "{store}: {field}: {r}");
        }
        assert!(r["p99_us"].as_f64() >= r["p50_us"].as_f64(), "{r}");
        assert_eq!(r["throughput"].as_array().unwrap().len(), 4, "{r}");
        let embedded = store.starts_with("sqlite");
        assert_eq!(r["floor_rtt_us"].is_null(), embedded, "{store}: {r}");
        if !embedded {
            let ratio = r["ratio_to_floor"].as_f64().unwrap();
            assert!(
                ratio > 0.0 && ratio < 2.0,
                "{store}: a cycle is at least one round trip: {r}"
            );
        }
    }
}
