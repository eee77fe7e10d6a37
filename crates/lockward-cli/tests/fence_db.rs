//! `lockward fence` and `lockward run --fence-db` against a real
//! PostgreSQL: the paused holder end to end, where the database itself
//! refuses the late write of a command that lockward could not stop; a
//! claim that fails keeps the command from starting; install, status and
//! uninstall from the command line.
#![cfg(feature = "postgres")]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{assert_fence_bench_figures, fence, lockward, signal_all as signal, wait_for_file};
use lockward_testkit::descendants;
use lockward_testkit::PostgresServer;

fn guarded_stock(server: &PostgresServer) {
    server.psql("CREATE TABLE stock (sku text PRIMARY KEY, fence bigint)");
    let out = fence(&server.url(), "install", &["stock", "--lock", "migrate"]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn the_database_refuses_the_late_write_of_a_paused_holder() {
    let server = PostgresServer::start();
    guarded_stock(&server);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = format!("sqlite://{}", d.join("locks.db").display());
    let db = server.url();
    // A writes, then waits for `go`, then writes again: a job that wakes
    // from a long pause and carries on.
    let script = r#"
        echo $$ > "$1/command"
        psql "$2" -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO stock VALUES ('a-first', $LOCKWARD_FENCE)"
        echo "$LOCKWARD_FENCE" > "$1/a-fence"
        while [ ! -e "$1/go" ]; do sleep 0.02; done
        psql "$2" -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO stock VALUES ('a-late', $LOCKWARD_FENCE)" 2> "$1/late.err"
        echo $? > "$1/late.code"
        while :; do sleep 0.05; done
    "#;
    let a = Command::new(lockward())
        .args(["--store", &store, "run", "migrate", "--ttl", "2s"])
        .args(["--fence-db", &db, "--"])
        .args(["sh", "-c", script, "sh"])
        .arg(d)
        .arg(&db)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let a_fence: u64 = wait_for_file(&d.join("a-fence"), Duration::from_secs(20))
        .parse()
        .unwrap();
    let command: u32 = wait_for_file(&d.join("command"), Duration::from_secs(1))
        .parse()
        .unwrap();
    // A freezes whole: lockward, whatever it runs beside the command, and
    // the command.
    let mut frozen = vec![a.id()];
    frozen.extend(descendants(a.id()));
    signal(&frozen, libc::SIGSTOP);
    // B takes the lock once A's lease runs out, claims and writes.
    let b = Command::new(lockward())
        .args(["--store", &store, "run", "migrate", "--ttl", "5s", "--wait", "20s"])
        .args(["--fence-db", &db, "--"])
        .args(["sh", "-c"])
        .arg(r#"psql "$1" -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO stock VALUES ('b', $LOCKWARD_FENCE)""#)
        .args(["sh", &db])
        .output()
        .unwrap();
    assert!(b.status.success(), "{b:?}");
    let b_fence: i64 = server
        .psql("SELECT fence FROM stock WHERE sku = 'b'")
        .parse()
        .unwrap();
    assert!(b_fence as u64 > a_fence, "{b_fence} <= {a_fence}");
    // Only A's command wakes: lockward stays frozen, so nothing of
    // lockward's can stop it first. Its write is refused by the database.
    std::fs::write(d.join("go"), "").unwrap();
    let mut command_tree = vec![command];
    command_tree.extend(descendants(command));
    signal(&command_tree, libc::SIGCONT);
    let code = wait_for_file(&d.join("late.code"), Duration::from_secs(20));
    assert_ne!(code, "0", "the late write went in");
    let said = std::fs::read_to_string(d.join("late.err")).unwrap();
    assert!(
        said.contains(&format!(
            "stale fence {a_fence} for lock migrate: fence {b_fence}"
        )),
        "{said}"
    );
    assert_eq!(
        server.psql("SELECT string_agg(sku, ',' ORDER BY sku) FROM stock"),
        "a-first,b"
    );
    // lockward A wakes, finds its lock lost, stops its command: 76.
    signal(&frozen, libc::SIGCONT);
    let out = a.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(76),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_claim_that_fails_keeps_the_command_from_starting() {
    let server = PostgresServer::start();
    guarded_stock(&server);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = format!("sqlite://{}", d.join("locks.db").display());
    // The stored fence is beyond anything this store hands out (as after
    // moving the lock from a store with larger fences): fences are at
    // least the clock in µs, about 1.8e15 now, so 4e15 (the year 2096).
    let beyond = "4000000000000000";
    let out = fence(&server.url(), "reset", &["migrate", "--to", beyond]);
    assert_eq!(out.status.code(), Some(64), "reset needs --yes: {out:?}");
    let out = fence(
        &server.url(),
        "reset",
        &["migrate", "--to", beyond, "--yes"],
    );
    assert!(out.status.success(), "{out:?}");
    let run = |db: &str| {
        Command::new(lockward())
            .args(["--store", &store, "run", "migrate", "--fence-db", db, "--"])
            .args(["touch"])
            .arg(d.join("ran"))
            .output()
            .unwrap()
    };
    let stale = run(&server.url());
    assert_eq!(stale.status.code(), Some(76), "{stale:?}");
    assert!(
        String::from_utf8_lossy(&stale.stderr).contains("before the command started"),
        "{stale:?}"
    );
    assert!(!d.join("ran").exists());
    // An unreachable database: 69, and the command does not start either.
    let port = lockward_testkit::free_port();
    let down = run(&format!("postgres://postgres:x@127.0.0.1:{port}/postgres"));
    assert_eq!(down.status.code(), Some(69), "{down:?}");
    assert!(!d.join("ran").exists());
    // The lock was released each time.
    let out = fence(&server.url(), "reset", &["migrate", "--to", "1", "--yes"]);
    assert!(out.status.success());
    assert!(run(&server.url()).status.success());
    assert!(d.join("ran").exists());
}

#[test]
fn install_status_and_uninstall_from_the_command_line() {
    let server = PostgresServer::start();
    guarded_stock(&server);
    let db = server.url();
    let again = fence(&db, "install", &["stock", "--lock", "migrate"]);
    assert!(again.status.success(), "{again:?}");
    let claimed = fence(&db, "claim", &["migrate", "7"]);
    assert!(claimed.status.success(), "{claimed:?}");
    let status = fence(&db, "status", &["--json"]);
    assert!(status.status.success(), "{status:?}");
    let shown: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(shown["tables"].as_array().map(Vec::len), Some(1), "{shown}");
    assert_eq!(shown["tables"][0]["table"], "stock");
    assert_eq!(shown["tables"][0]["lock"], "migrate");
    assert_eq!(shown["tables"][0]["enabled"], true);
    assert_eq!(shown["fences"][0]["fence"], 7);
    // --end-stale ends a session that holds a claim up: one that wrote
    // under fence 7 and sits in its open transaction.
    let mut open = std::process::Command::new("psql")
        .arg(&db)
        .args([
            "-X",
            "-q",
            "-c",
            "BEGIN; UPDATE stock SET fence = 0; SELECT pg_sleep(60)",
        ])
        .env("PGOPTIONS", "-c lockward.fences=migrate=7")
        .env("PGAPPNAME", "stuck-psql")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let active = "SELECT count(*) FROM pg_stat_activity \
                  WHERE application_name = 'stuck-psql' AND wait_event = 'PgSleep'";
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while server.psql(active) != "1" {
        assert!(
            std::time::Instant::now() < until,
            "the stuck session never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = fence(
        &db,
        "claim",
        &["migrate", "8", "--within", "2s", "--end-stale"],
    );
    assert!(ended.status.success(), "{ended:?}");
    let said = String::from_utf8_lossy(&ended.stdout);
    assert!(
        said.contains("stuck-psql") && said.contains("fence 8 claimed"),
        "{said}"
    );
    let _ = open.wait();
    // A disabled trigger is shown as such.
    server.psql("ALTER TABLE stock DISABLE TRIGGER lockward_fence");
    let text = fence(&db, "status", &[]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("GUARD OFF"),
        "{text:?}"
    );
    let stale = fence(&db, "claim", &["migrate", "6"]);
    assert_eq!(stale.status.code(), Some(76), "{stale:?}");
    let out = fence(&db, "uninstall", &["stock", "--purge"]);
    assert!(out.status.success(), "{out:?}");
    let status = fence(&db, "status", &["--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(shown["tables"].as_array().map(Vec::len), Some(0), "{shown}");
    assert_eq!(shown["fences"].as_array().map(Vec::len), Some(0), "{shown}");
}

#[test]
fn the_bench_measures_the_guard_beside_a_plain_table() {
    let server = PostgresServer::start();
    let out = fence(
        &server.url(),
        "bench",
        &["--rows", "2000", "--duration", "200ms", "--json"],
    );
    assert_fence_bench_figures(&out);
    // A second run on the same database starts its lock over.
    let again = fence(
        &server.url(),
        "bench",
        &["--rows", "100", "--duration", "50ms"],
    );
    assert!(again.status.success(), "{again:?}");
    // Its tables are gone again.
    assert_eq!(
        server.psql("SELECT count(*) FROM pg_class WHERE relname LIKE 'lockward_bench%'"),
        "0"
    );
}

#[test]
fn once_and_elect_claim_their_fence_and_pass_it_on() {
    let server = PostgresServer::start();
    guarded_stock(&server);
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("locks.db").display());
    let db = server.url();
    let write = |sku: &str| {
        format!(
            r#"psql "$1" -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO stock VALUES ('{sku}', $LOCKWARD_FENCE)""#
        )
    };
    for (command, sku) in [
        (vec!["once", "migrate"], "by-once"),
        (vec!["elect", "migrate", "--identity", "node-a"], "by-elect"),
    ] {
        let out = Command::new(lockward())
            .args(["--store", &store])
            .args(&command)
            .args(["--fence-db", &db, "--", "sh", "-c", &write(sku), "sh", &db])
            .output()
            .unwrap();
        assert!(out.status.success(), "{command:?}: {out:?}");
    }
    assert_eq!(
        server.psql("SELECT string_agg(sku, ',' ORDER BY sku) FROM stock"),
        "by-elect,by-once"
    );
    // One run at a time, or a newer run would refuse an older one's writes.
    let overlapping = Command::new(lockward())
        .args(["--store", &store, "cron", "migrate", "* * * * *"])
        .args(["--overlap", "allow", "--fence-db", &db, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(overlapping.status.code(), Some(64), "{overlapping:?}");
    // Readers hold together, each with its own fence.
    let shared = Command::new(lockward())
        .args(["--store", &store, "run", "migrate", "--shared"])
        .args(["--fence-db", &db, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(shared.status.code(), Some(64), "{shared:?}");
}

#[test]
fn doctor_checks_the_guarded_database() {
    let server = PostgresServer::start();
    guarded_stock(&server);
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("locks.db").display());
    let doctor = || {
        let out = Command::new(lockward())
            .args([
                "--store",
                &store,
                "doctor",
                "--json",
                "--fence-db",
                &server.url(),
            ])
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let levels: Vec<(String, String, String)> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["check"].as_str().unwrap().starts_with("fence db"))
            .map(|f| {
                let s = |k: &str| f[k].as_str().unwrap().to_string();
                (s("check"), s("level"), s("detail"))
            })
            .collect();
        (out.status.code(), levels)
    };
    let (_, findings) = doctor();
    assert_eq!(findings.len(), 5, "{findings:?}");
    assert!(
        findings.iter().all(|(_, level, _)| level == "ok"),
        "{findings:?}"
    );
    // A disabled trigger and a partition made after install are errors.
    server.psql("ALTER TABLE stock DISABLE TRIGGER lockward_fence");
    server.psql(
        "CREATE TABLE events (id int, at date) PARTITION BY RANGE (at); \
         CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
    );
    let out = fence(&server.url(), "install", &["events", "--lock", "migrate"]);
    assert!(out.status.success(), "{out:?}");
    server.psql(
        "CREATE TABLE events_2027 PARTITION OF events FOR VALUES FROM ('2027-01-01') TO ('2028-01-01')",
    );
    let (code, findings) = doctor();
    assert_eq!(code, Some(1), "{findings:?}");
    let said = |check: &str| {
        findings
            .iter()
            .find(|(c, _, _)| c == check)
            .map(|(_, level, detail)| format!("{level}: {detail}"))
            .unwrap_or_default()
    };
    assert!(said("fence db: guarded tables").starts_with("error: the guard is disabled on stock"));
    assert!(
        said("fence db: partitions").contains("events_2027"),
        "{findings:?}"
    );
}
