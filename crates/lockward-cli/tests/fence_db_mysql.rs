//! `lockward fence` and `lockward run --fence-db` against a real MariaDB:
//! the paused holder end to end, where the database itself refuses the
//! late write of a command that lockward could not stop (the `mariadb`
//! client, given the init command lockward exported); install, status,
//! claim and uninstall from the command line; the bench; the doctor.
#![cfg(feature = "mysql")]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{assert_fence_bench_figures, fence, lockward, signal_all, wait_for_file};
use lockward_testkit::descendants;
use lockward_testkit::mariadb::PASSWORD;
use lockward_testkit::MariadbServer;

fn guarded_stock(server: &MariadbServer) {
    server.sql(
        "CREATE TABLE lockward.stock (sku VARCHAR(40) PRIMARY KEY, fence BIGINT) ENGINE=InnoDB",
    );
    let out = fence(&server.url(), "install", &["stock", "--lock", "migrate"]);
    assert!(out.status.success(), "{out:?}");
}

/// The shell words that run the `mariadb` client as the test user, with
/// the init command lockward exported: `$MARIADB -e "…"`.
fn client(server: &MariadbServer) -> String {
    let port = server.addr().rsplit(':').next().unwrap().to_string();
    format!(
        "mariadb --no-defaults -h127.0.0.1 -P{port} -ulockward -p{PASSWORD} lockward --init-command=\"$LOCKWARD_FENCE_DB_INIT\""
    )
}

#[test]
fn the_database_refuses_the_late_write_of_a_paused_holder() {
    let server = MariadbServer::start();
    guarded_stock(&server);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = format!("sqlite://{}", d.join("locks.db").display());
    let db = server.url();
    let mariadb = client(&server);
    let script = format!(
        r#"
        echo $$ > "$1/command"
        {mariadb} -e "INSERT INTO stock VALUES ('a-first', $LOCKWARD_FENCE)"
        echo "$LOCKWARD_FENCE" > "$1/a-fence"
        while [ ! -e "$1/go" ]; do sleep 0.02; done
        {mariadb} -e "INSERT INTO stock VALUES ('a-late', $LOCKWARD_FENCE)" 2> "$1/late.err"
        echo $? > "$1/late.code"
        while :; do sleep 0.05; done
    "#
    );
    let a = Command::new(lockward())
        .args(["--store", &store, "run", "migrate", "--ttl", "2s"])
        .args(["--fence-db", &db, "--"])
        .args(["sh", "-c", &script, "sh"])
        .arg(d)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let a_fence: u64 = wait_for_file(&d.join("a-fence"), Duration::from_secs(20))
        .parse()
        .unwrap();
    let command: u32 = wait_for_file(&d.join("command"), Duration::from_secs(1))
        .parse()
        .unwrap();
    let mut frozen = vec![a.id()];
    frozen.extend(descendants(a.id()));
    signal_all(&frozen, libc::SIGSTOP);
    let b = Command::new(lockward())
        .args([
            "--store", &store, "run", "migrate", "--ttl", "5s", "--wait", "20s",
        ])
        .args(["--fence-db", &db, "--"])
        .args(["sh", "-c"])
        .arg(format!(
            r#"{mariadb} -e "INSERT INTO stock VALUES ('b', $LOCKWARD_FENCE)""#
        ))
        .output()
        .unwrap();
    assert!(b.status.success(), "{b:?}");
    let b_fence: u64 = server
        .sql("SELECT fence FROM lockward.stock WHERE sku = 'b'")
        .parse()
        .unwrap();
    assert!(b_fence > a_fence, "{b_fence} <= {a_fence}");
    // Only A's command wakes; the database refuses its write.
    std::fs::write(d.join("go"), "").unwrap();
    let mut command_tree = vec![command];
    command_tree.extend(descendants(command));
    signal_all(&command_tree, libc::SIGCONT);
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
        server.sql("SELECT GROUP_CONCAT(sku ORDER BY sku) FROM lockward.stock"),
        "a-first,b"
    );
    signal_all(&frozen, libc::SIGCONT);
    let out = a.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(76),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn install_status_claim_and_uninstall_from_the_command_line() {
    let server = MariadbServer::start();
    server.sql("GRANT PROCESS ON *.* TO 'lockward'@'127.0.0.1'");
    guarded_stock(&server);
    let db = server.url();
    let again = fence(&db, "install", &["stock", "--lock", "migrate"]);
    assert!(again.status.success(), "{again:?}");
    assert!(fence(&db, "claim", &["migrate", "7"]).status.success());
    let status = fence(&db, "status", &["--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(shown["tables"].as_array().map(Vec::len), Some(1), "{shown}");
    assert_eq!(shown["tables"][0]["table"], "lockward.stock");
    assert_eq!(shown["tables"][0]["lock"], "migrate");
    assert_eq!(shown["tables"][0]["enabled"], true);
    assert_eq!(shown["fences"][0]["fence"], 7);
    // --end-stale ends a session that wrote under fence 7 and sits in its
    // open transaction (a row trigger checks only when a row is written).
    let mut open = Command::new("sh")
        .args([
            "-c",
            &format!(
                "{} -e \"START TRANSACTION; INSERT INTO stock VALUES ('stuck', 0); SELECT SLEEP(60)\"",
                client(&server)
            ),
        ])
        .env(
            "LOCKWARD_FENCE_DB_INIT",
            lockward::fence::mysql::init_command(&[("migrate", 7)]),
        )
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sleeping =
        "SELECT count(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(60)'";
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while server.sql(sleeping) != "1" {
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
        said.contains("ended") && said.contains("fence 8 claimed"),
        "{said}"
    );
    let _ = open.wait();
    assert_eq!(
        server.sql("SELECT count(*) FROM lockward.stock WHERE sku = 'stuck'"),
        "0"
    );
    // A dropped trigger shows in the status.
    let name = server.sql(
        "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_MANIPULATION = 'UPDATE'",
    );
    server.sql(&format!("DROP TRIGGER lockward.{name}"));
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
    let server = MariadbServer::start();
    let out = fence(
        &server.url(),
        "bench",
        &["--rows", "2000", "--duration", "200ms", "--json"],
    );
    assert_fence_bench_figures(&out);
    assert_eq!(
        server.sql("SELECT count(*) FROM information_schema.TABLES WHERE TABLE_NAME LIKE 'lockward_bench%'"),
        "0"
    );
}

#[test]
fn doctor_checks_the_guarded_database() {
    let server = MariadbServer::start();
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
        let found: Vec<(String, String, String)> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["check"].as_str().unwrap().starts_with("fence db"))
            .map(|f| {
                let s = |k: &str| f[k].as_str().unwrap().to_string();
                (s("check"), s("level"), s("detail"))
            })
            .collect();
        found
    };
    let said = |found: &[(String, String, String)], check: &str| {
        found
            .iter()
            .find(|(c, _, _)| c == check)
            .map(|(_, level, detail)| format!("{level}: {detail}"))
            .unwrap_or_default()
    };
    let found = doctor();
    assert!(
        said(&found, "fence db: version").contains("MariaDB"),
        "{found:?}"
    );
    assert!(
        said(&found, "fence db: guarded tables").starts_with("ok: lockward.stock (lock migrate)"),
        "{found:?}"
    );
    assert!(
        said(&found, "fence db: claim").starts_with("ok:"),
        "{found:?}"
    );
    assert!(
        said(&found, "fence db: cascades").starts_with("ok:"),
        "{found:?}"
    );
    assert!(
        said(&found, "fence db: truncate").starts_with("warning:"),
        "{found:?}"
    );
    // A cascade from a parent changes guarded rows without a trigger.
    server.sql(
        "CREATE TABLE lockward.skus (sku VARCHAR(40) PRIMARY KEY) ENGINE=InnoDB; \
         INSERT INTO lockward.skus SELECT sku FROM lockward.stock; \
         ALTER TABLE lockward.stock ADD FOREIGN KEY (sku) REFERENCES lockward.skus (sku) ON DELETE CASCADE",
    );
    let found = doctor();
    assert!(
        said(&found, "fence db: cascades")
            .contains("lockward.stock changes with lockward.skus (ON DELETE CASCADE"),
        "{found:?}"
    );
}
