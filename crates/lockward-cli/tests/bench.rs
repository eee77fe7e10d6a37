//! `lockward bench --json --svg` on every store: every figure is measured,
//! server stores report their floor and the ratio to it, the scale run
//! holds every lock it was asked for, a semaphore is timed beside holders,
//! both failovers are timed with real
//! `lockward elect` processes, and the plot has every line.

mod common;

use std::process::Command;

use common::{every_store, lockward};

#[test]
fn bench_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let every = every_store(dir.path());
    for store in &every.urls {
        // kill -9 failover on ZooKeeper waits for the dead leader's session.
        let store = if store.starts_with("zk://") && !store.contains('?') {
            format!("{store}?session_timeout=2s")
        } else {
            store.clone()
        };
        let svg = dir.path().join("bench.svg");
        let out = Command::new(lockward())
            .args(["--store", &store, "bench", "--json"])
            .args(["--duration", "300ms", "--clients", "1,4"])
            .args([
                "--scale",
                "300",
                "--failover-lease",
                "1s",
                "--rw-clients",
                "4",
                "--semaphore-holders",
                "40",
                "--svg",
            ])
            .arg(&svg)
            // Beside idle listeners of another program, on PostgreSQL.
            .args(if store.starts_with("postgres://") {
                &["--idle-listeners", "4"][..]
            } else {
                &[][..]
            })
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{store}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let listeners = if store.starts_with("postgres://") {
            4
        } else {
            0
        };
        assert_eq!(r["idle_listeners"], listeners, "{store}: {r}");
        for field in ["cycles_per_s", "p50_us", "p99_us", "handoff_p50_us"] {
            assert!(r[field].as_f64().unwrap() > 0.0, "{store}: {field}: {r}");
        }
        assert!(r["p99_us"].as_f64() >= r["p50_us"].as_f64(), "{r}");
        assert!(r["max_us"].as_f64() >= r["p999_us"].as_f64(), "{r}");
        assert_eq!(r["throughput"].as_array().unwrap().len(), 4, "{r}");
        let embedded = store.starts_with("sqlite");
        assert_eq!(r["floor_rtt_us"].is_null(), embedded, "{store}: {r}");
        if !embedded {
            let ratio = r["ratio_to_floor"].as_f64().unwrap();
            assert!(
                ratio > 0.0 && ratio < 2.0,
                "{store}: a cycle is at least two round trips: {r}"
            );
        }

        let scale = &r["scale"];
        if common::session_locks(&store) {
            // One connection per held lock: max_connections is the limit,
            // and the run says so rather than failing.
            let locks = scale["locks"].as_u64().unwrap();
            assert!(locks > 0, "{store}: {scale}");
            assert!(
                locks == 300 || scale["stopped"].is_string(),
                "{store}: {scale}"
            );
        } else {
            assert_eq!(scale["locks"], 300, "{store}: {scale}");
            assert!(scale["stopped"].is_null(), "{store}: {scale}");
            assert!(scale["cycles_per_s_while_held"].as_f64().unwrap() > 0.0);
        }
        if store.starts_with("redis://") {
            let ratio = scale["ratio_to_bare_key"].as_f64().unwrap();
            assert!(ratio > 0.5 && ratio < 3.0, "{store}: {scale}");
        }

        // A semaphore timed empty and beside 40 holders, kept by the store
        // where it can.
        let native = ["redis://", "redis+cluster://", "etcd://", "zk://"]
            .iter()
            .any(|s| store.starts_with(s))
            || (store.starts_with("postgres://") && !store.contains("mode=advisory"));
        assert_eq!(r["semaphore"]["native"], native, "{store}: {r}");
        let crowd = &r["semaphore_crowd"];
        assert_eq!(crowd["holders"], 40, "{store}: {crowd}");
        for field in ["empty_p50_us", "crowded_p50_us", "ratio"] {
            assert!(
                crowd[field].as_f64().is_some_and(|v| v > 0.0),
                "{store}: {field}: {crowd}"
            );
        }
        if store.starts_with("redis://") {
            assert!(crowd["bytes_per_holder"].as_f64().unwrap() > 0.0, "{crowd}");
            assert_eq!(crowd["bytes_measured"], "used_memory", "{crowd}");
        }

        let rw = &r["rw_lock"];
        for field in [
            "plain_p50_us",
            "read_p50_us",
            "write_p50_us",
            "readers_cycles_per_s",
            "plain_cycles_per_s",
        ] {
            assert!(
                rw[field].as_f64().is_some_and(|v| v > 0.0),
                "{store}: {field}: {rw}"
            );
        }

        let failover = &r["failover"];
        let killed = failover["after_kill_ms"].as_f64().unwrap_or_else(|| {
            panic!("{store}: no failover: {failover}");
        });
        let resigned = failover["after_resign_ms"].as_f64().unwrap();
        let kills = failover["kills_ms"].as_array().map(Vec::len);
        assert_eq!(kills, Some(3), "{store}: three kills: {failover}");
        assert!(
            resigned < 1_000.0,
            "{store}: a resign hands over at once: {failover}"
        );
        if common::session_locks(&store) {
            // The server ends a dead holder's session lock at once.
            assert!(killed < 1_000.0, "{store}: {failover}");
        } else {
            // The lease (1 s, or the 2 s ZooKeeper session) has to run out.
            assert!(killed > 300.0 && killed < 8_000.0, "{store}: {failover}");
            assert!(resigned < killed, "{store}: {failover}");
        }

        let plot = std::fs::read_to_string(&svg).unwrap();
        assert!(plot.starts_with("<svg"), "{store}");
        // Cycle, handoff and cycle-while-held; one name and distinct names.
        assert_eq!(plot.matches("<polyline").count(), 5, "{store}");
        assert!(!plot.contains("NaN") && !plot.contains("inf"), "{store}");
    }
}

#[test]
fn bench_refuses_bad_arguments_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("l.db").display());
    for args in [
        vec!["--clients", "0"],
        vec!["--names", "some"],
        vec!["--svg", "/nonexistent-dir/x.svg"],
        // Only PostgreSQL has listeners other programs share.
        vec!["--idle-listeners", "2"],
    ] {
        let out = Command::new(lockward())
            .args(["--store", &store, "bench"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
}
