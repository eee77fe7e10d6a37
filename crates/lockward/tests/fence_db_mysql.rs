//! Fences enforced by MariaDB itself, on a real server: install is
//! idempotent; a claim waits for the old holder's open transactions; after
//! it, the old fence is refused, the current holder's transactions run
//! side by side, a made-up fence and a missing one are refused, at every
//! isolation level; the check a statement remembers never outlives it
//! (also in a session that pins its timestamp); the `mariadb` client,
//! which knows nothing of lockward, is fenced through its init command.

use std::time::Duration;

use lockward::fence::mysql::init_command;
use lockward::fence::{FenceDb, Unfenced};
use lockward::Error;
use lockward_testkit::mariadb::PASSWORD;
use lockward_testkit::MariadbServer;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

const LEVELS: [&str; 3] = ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"];

/// A plain connection, as an application has, writing with `fences`
/// (`lock=N`, or nothing).
async fn writer(server: &MariadbServer, fences: Option<&str>) -> Conn {
    let mut conn = Conn::from_url(format!("{}?prefer_socket=false", server.url()))
        .await
        .unwrap();
    if let Some(fences) = fences {
        conn.query_drop(format!("SET @lockward_fences = '{fences}'"))
            .await
            .unwrap();
    }
    conn
}

/// The SQLSTATE of a refused statement.
fn sqlstate<T: std::fmt::Debug>(result: Result<T, mysql_async::Error>) -> String {
    match result.expect_err("refused") {
        mysql_async::Error::Server(e) => e.state,
        other => panic!("not a server error: {other}"),
    }
}

async fn guarded_table(server: &MariadbServer, unfenced: Unfenced) -> FenceDb {
    server.sql("CREATE TABLE IF NOT EXISTS lockward.stock (sku VARCHAR(40) PRIMARY KEY, n INT) ENGINE=InnoDB");
    let mut db = FenceDb::connect(&server.url()).await.unwrap();
    db.install(&["stock".to_string()], "inventory", unfenced, None)
        .await
        .unwrap();
    db
}

/// Waits until InnoDB shows `n` transactions waiting for a lock. InnoDB
/// refreshes what it shows only when it was not read for 100 ms, so this
/// reads less often than that.
async fn until_waiting(server: &MariadbServer, n: usize, what: &str) {
    let waiting =
        "SELECT count(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'";
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while server.sql(waiting) != n.to_string() {
        assert!(std::time::Instant::now() < until, "{what} never waited");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

#[tokio::test]
async fn install_twice_uninstall_and_install_again_leave_one_guard() {
    let server = MariadbServer::start();
    server.sql("CREATE TABLE lockward.events (id INT, at DATE) PARTITION BY RANGE (YEAR(at)) (PARTITION p2026 VALUES LESS THAN (2027))");
    let mut db = guarded_table(&server, Unfenced::Refuse).await;
    let again = db
        .install(
            &["stock".into(), "lockward.events".into()],
            "inventory",
            Unfenced::Refuse,
            None,
        )
        .await
        .unwrap();
    assert_eq!(again, ["lockward.stock", "lockward.events"]);
    let count = || {
        server.sql("SELECT count(*) FROM information_schema.TRIGGERS WHERE TRIGGER_NAME LIKE 'lockward\\_fence\\_%'")
    };
    assert_eq!(count(), "6");
    let guarded = db.guarded().await.unwrap();
    assert_eq!(guarded.len(), 2);
    assert!(guarded
        .iter()
        .all(|g| g.lock == "inventory" && g.enabled && g.unfenced == Unfenced::Refuse));
    // A partitioned table is one table to its triggers.
    let mut unfenced = writer(&server, None).await;
    let direct = unfenced
        .query_drop("INSERT INTO events PARTITION (p2026) VALUES (1, '2026-03-01')")
        .await;
    assert_eq!(sqlstate(direct), "LW002");
    // A dropped trigger shows: that kind of write goes around the guard.
    let name = server.sql("SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_TABLE = 'stock' AND EVENT_MANIPULATION = 'DELETE'");
    server.sql(&format!("DROP TRIGGER lockward.{name}"));
    let stock = db.guarded().await.unwrap();
    assert!(
        stock
            .iter()
            .any(|g| g.table == "lockward.stock" && !g.enabled),
        "{stock:?}"
    );
    db.uninstall(&["stock".into(), "events".into()], false)
        .await
        .unwrap();
    assert_eq!(count(), "0");
    assert!(db.guarded().await.unwrap().is_empty());
    db.install(&["stock".into()], "inventory", Unfenced::Refuse, None)
        .await
        .unwrap();
    assert_eq!(count(), "3");
    // Purging refuses while a table is guarded, then drops lockward's objects.
    assert!(matches!(
        db.uninstall(&[], true).await,
        Err(Error::InvalidArgument { .. })
    ));
    db.uninstall(&["stock".into()], true).await.unwrap();
    assert_eq!(
        server.sql(
            "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_NAME = 'lockward_fences'"
        ),
        "0"
    );
    let missing = db
        .install(&["nope".into()], "inventory", Unfenced::Refuse, None)
        .await;
    assert!(
        matches!(&missing, Err(Error::InvalidArgument { why, .. }) if why.contains("nope")),
        "{missing:?}"
    );
}

#[tokio::test]
async fn a_claim_orders_the_old_holders_writes_before_it_and_refuses_them_after() {
    let server = MariadbServer::start();
    let db = guarded_table(&server, Unfenced::Refuse).await;
    for (round, level) in LEVELS.iter().enumerate() {
        let old = 10 * (round as u64 + 1);
        let new = old + 1;
        assert_eq!(
            db.claim("inventory", old, Duration::from_secs(5))
                .await
                .unwrap(),
            old
        );
        // The old holder is in the middle of a transaction that wrote.
        let mut a = writer(&server, Some(&format!("inventory={old}"))).await;
        a.query_drop(format!("SET TRANSACTION ISOLATION LEVEL {level}"))
            .await
            .unwrap();
        a.query_drop("START TRANSACTION").await.unwrap();
        a.exec_drop(
            "INSERT INTO stock VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1",
            (format!("a-{round}"),),
        )
        .await
        .unwrap();
        // The new holder's claim waits for it, as the server shows.
        let claimer = FenceDb::connect(&server.url()).await.unwrap();
        let claim = tokio::spawn(async move {
            claimer
                .claim("inventory", new, Duration::from_secs(10))
                .await
        });
        until_waiting(&server, 1, &format!("the claim at {level}")).await;
        assert!(!claim.is_finished());
        a.query_drop("COMMIT").await.unwrap();
        assert_eq!(claim.await.unwrap().unwrap(), new);
        assert_eq!(
            server.sql(&format!(
                "SELECT n FROM lockward.stock WHERE sku = 'a-{round}'"
            )),
            "1"
        );
        // After the claim, its writes are refused: the check its last
        // statement remembered did not outlive that statement.
        a.query_drop(format!("SET TRANSACTION ISOLATION LEVEL {level}"))
            .await
            .unwrap();
        a.query_drop("START TRANSACTION").await.unwrap();
        let late = a
            .exec_drop(
                "UPDATE stock SET n = 99 WHERE sku = ?",
                (format!("a-{round}"),),
            )
            .await;
        assert_eq!(sqlstate(late), "LW001", "{level}");
        a.query_drop("ROLLBACK").await.unwrap();
        // Two transactions of the new holder run side by side.
        let mut b1 = writer(&server, Some(&format!("inventory={new}"))).await;
        let mut b2 = writer(&server, Some(&format!("inventory={new}"))).await;
        for b in [&mut b1, &mut b2] {
            b.query_drop(format!("SET TRANSACTION ISOLATION LEVEL {level}"))
                .await
                .unwrap();
            b.query_drop("START TRANSACTION").await.unwrap();
        }
        b1.exec_drop("INSERT INTO stock VALUES (?, 1)", (format!("b1-{round}"),))
            .await
            .unwrap();
        let second = tokio::time::timeout(
            Duration::from_secs(2),
            b2.exec_drop("INSERT INTO stock VALUES (?, 1)", (format!("b2-{round}"),)),
        )
        .await
        .expect("the holder's second transaction waited on its first");
        second.unwrap();
        for b in [&mut b1, &mut b2] {
            b.query_drop("COMMIT").await.unwrap();
        }
        // A made-up fence, above the claimed one, and none at all.
        let mut made_up = writer(&server, Some(&format!("inventory={}", new + 5))).await;
        let written = made_up.query_drop("DELETE FROM stock").await;
        assert_eq!(sqlstate(written), "LW004", "{level}");
        let mut none = writer(&server, None).await;
        assert_eq!(
            sqlstate(none.query_drop("DELETE FROM stock").await),
            "LW002"
        );
    }
    let stale = db.claim("inventory", 5, Duration::from_secs(5)).await;
    assert!(
        matches!(
            stale,
            Err(Error::Stale {
                fence: 5,
                current: 31,
                ..
            })
        ),
        "{stale:?}"
    );
}

#[tokio::test]
async fn a_many_row_statement_is_checked_and_a_pinned_timestamp_keeps_no_memo() {
    let server = MariadbServer::start();
    let db = guarded_table(&server, Unfenced::Refuse).await;
    db.claim("inventory", 3, Duration::from_secs(5))
        .await
        .unwrap();
    let mut a = writer(&server, Some("inventory=3")).await;
    a.query_drop("INSERT INTO stock SELECT CONCAT('s', seq), seq FROM seq_1_to_10000")
        .await
        .unwrap();
    // One lock per statement and table: a one-lock session's settings.
    let mut one = writer(&server, None).await;
    one.query_drop("SET @lockward_lock = 'inventory', @lockward_fence = 3")
        .await
        .unwrap();
    one.query_drop("UPDATE stock SET n = n + 1 WHERE sku = 's1'")
        .await
        .unwrap();
    // A session that pins its timestamp: every statement shares it, so a
    // remembered check would let the next statement through unchecked.
    let mut pinned = writer(&server, Some("inventory=3")).await;
    pinned
        .query_drop("SET timestamp = 1700000000")
        .await
        .unwrap();
    pinned
        .query_drop("UPDATE stock SET n = n + 1 WHERE sku = 's2'")
        .await
        .unwrap();
    db.claim("inventory", 4, Duration::from_secs(5))
        .await
        .unwrap();
    for conn in [&mut a, &mut one, &mut pinned] {
        let late = conn
            .query_drop("UPDATE stock SET n = 0 WHERE sku = 's3'")
            .await;
        assert_eq!(sqlstate(late), "LW001");
    }
    let not_a_number = writer(&server, Some("inventory=x"))
        .await
        .query_drop("DELETE FROM stock")
        .await;
    assert_eq!(sqlstate(not_a_number), "LW003");
    // Beyond BIGINT UNSIGNED is not a fence either (not a cast's error).
    let too_big = writer(&server, Some("inventory=99999999999999999999"))
        .await
        .query_drop("DELETE FROM stock")
        .await;
    assert_eq!(sqlstate(too_big), "LW003");
    assert_eq!(
        server.sql("SELECT count(*) FROM lockward.stock WHERE n = 0"),
        "0"
    );
}

#[tokio::test]
async fn a_claim_held_up_too_long_times_out_and_ending_stale_sessions_lets_it_through() {
    let server = MariadbServer::start();
    server.sql("GRANT PROCESS ON *.* TO 'lockward'@'127.0.0.1'");
    let db = guarded_table(&server, Unfenced::Refuse).await;
    db.claim("inventory", 3, Duration::from_secs(5))
        .await
        .unwrap();
    let mut stuck = writer(&server, Some("inventory=3")).await;
    let stuck_id = stuck.id();
    stuck
        .query_drop("START TRANSACTION; INSERT INTO stock VALUES ('half-done', 1)")
        .await
        .unwrap();
    let began = std::time::Instant::now();
    let timed_out = db.claim("inventory", 4, Duration::from_millis(1200)).await;
    match timed_out {
        Err(Error::TimedOut { name, .. }) => {
            assert!(name.contains(&format!("connection {stuck_id} ")), "{name}")
        }
        other => panic!("expected TimedOut, got {other:?}"),
    }
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    let (stored, ended) = db
        .claim_ending_stale("inventory", 4, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(stored, 4);
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert!(ended[0].contains("ended"), "{ended:?}");
    assert!(stuck.query_drop("COMMIT").await.is_err());
    assert_eq!(
        server.sql("SELECT count(*) FROM lockward.stock WHERE sku = 'half-done'"),
        "0"
    );
}

#[tokio::test]
async fn unfenced_writes_pass_when_allowed_and_fences_are_shown() {
    let server = MariadbServer::start();
    let db = guarded_table(&server, Unfenced::Allow).await;
    writer(&server, None)
        .await
        .query_drop("INSERT INTO stock VALUES ('free', 1)")
        .await
        .unwrap();
    db.claim("inventory", 8, Duration::from_secs(5))
        .await
        .unwrap();
    let old = writer(&server, Some("inventory=7"))
        .await
        .query_drop("DELETE FROM stock")
        .await;
    assert_eq!(sqlstate(old), "LW001");
    let fences = db.fences().await.unwrap();
    assert_eq!(fences.len(), 1);
    assert_eq!((fences[0].lock.as_str(), fences[0].fence), ("inventory", 8));
    assert!(fences[0].raised_by.starts_with("lockward@"), "{fences:?}");
    db.reset("inventory", 2).await.unwrap();
    assert_eq!(db.fences().await.unwrap()[0].fence, 2);
}

#[tokio::test]
async fn the_mariadb_client_is_fenced_through_its_init_command() {
    let server = MariadbServer::start();
    let db = guarded_table(&server, Unfenced::Refuse).await;
    db.claim("inventory", 12, Duration::from_secs(5))
        .await
        .unwrap();
    let port = server.addr().rsplit(':').next().unwrap().to_string();
    let client = |fence: Option<u64>| {
        let mut cmd = std::process::Command::new("mariadb");
        cmd.args(["--no-defaults", "-h127.0.0.1", "-P", &port, "-ulockward"])
            .arg(format!("-p{PASSWORD}"))
            .arg("lockward");
        if let Some(fence) = fence {
            cmd.arg(format!(
                "--init-command={}",
                init_command(&[("inventory", fence)])
            ));
        }
        cmd.args([
            "-e",
            "INSERT INTO stock VALUES ('p', 1) ON DUPLICATE KEY UPDATE n = n + 1",
        ]);
        cmd.output().unwrap()
    };
    let current = client(Some(12));
    assert!(current.status.success(), "{current:?}");
    let stale = client(Some(11));
    assert!(!stale.status.success());
    let said = String::from_utf8_lossy(&stale.stderr);
    assert!(
        said.contains("stale fence 11 for lock inventory: fence 12"),
        "{said}"
    );
    let bare = client(None);
    assert!(
        String::from_utf8_lossy(&bare.stderr).contains("carries no fence"),
        "{bare:?}"
    );
    assert_eq!(
        server.sql("SELECT n FROM lockward.stock WHERE sku = 'p'"),
        "1"
    );
}
