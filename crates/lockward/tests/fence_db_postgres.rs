//! Fences enforced by PostgreSQL itself, on a real server: install is
//! idempotent; a claim waits for the old holder's open transactions; after
//! it, the old fence is refused, the current holder's transactions run
//! side by side, a made-up fence and a missing one are refused, at every
//! isolation level; `psql`, which knows nothing of lockward, is fenced
//! through `PGOPTIONS`.

use std::time::Duration;

use lockward::fence::postgres::session_options;
use lockward::fence::{FenceDb, Unfenced};
use lockward::Error;
use lockward_testkit::PostgresServer;
use tokio_postgres::{Client, NoTls};

const LEVELS: [&str; 3] = ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"];

/// A plain connection, as an application has, writing with `fences`
/// (`lock=N`, or nothing).
async fn writer(server: &PostgresServer, fences: Option<&str>) -> Client {
    let (client, connection) = tokio_postgres::connect(&server.url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    if let Some(fences) = fences {
        client
            .batch_execute(&format!("SET lockward.fences = '{fences}'"))
            .await
            .unwrap();
    }
    client
}

/// A writer under fence 3 of `inventory` that inserted `sku` and sits in
/// its open transaction, as application `name`.
async fn open_writer(server: &PostgresServer, name: &str, sku: &str) -> Client {
    let stuck = writer(server, Some("inventory=3")).await;
    stuck
        .batch_execute(&format!(
            "SET application_name = '{name}'; BEGIN; INSERT INTO stock VALUES ('{sku}', 1)"
        ))
        .await
        .unwrap();
    stuck
}

/// The SQLSTATE of a refused statement.
fn sqlstate<T: std::fmt::Debug>(result: Result<T, tokio_postgres::Error>) -> String {
    let e = result.expect_err("refused");
    e.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| panic!("not a database error: {e}"))
}

async fn guarded_table(server: &PostgresServer, unfenced: Unfenced) -> FenceDb {
    server.psql("CREATE TABLE IF NOT EXISTS stock (sku text PRIMARY KEY, n int)");
    let mut db = FenceDb::connect(&server.url()).await.unwrap();
    db.install(&["stock".to_string()], "inventory", unfenced, None)
        .await
        .unwrap();
    db
}

#[tokio::test]
async fn install_twice_uninstall_and_install_again_leave_one_guard() {
    let server = PostgresServer::start();
    server.psql(
        "CREATE TABLE events (id int, at date) PARTITION BY RANGE (at); \
         CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
    );
    let mut db = guarded_table(&server, Unfenced::Refuse).await;
    let again = db
        .install(
            &["stock".into(), "events".into()],
            "inventory",
            Unfenced::Refuse,
            None,
        )
        .await
        .unwrap();
    assert_eq!(again, ["stock", "events", "events_2026"]);
    let count = || server.psql("SELECT count(*) FROM pg_trigger WHERE tgname = 'lockward_fence'");
    assert_eq!(count(), "3");
    let guarded = db.guarded().await.unwrap();
    assert_eq!(guarded.len(), 3);
    assert!(guarded
        .iter()
        .all(|g| g.lock == "inventory" && g.enabled && g.unfenced == Unfenced::Refuse));
    // A write straight into the partition is guarded too.
    let unfenced = writer(&server, None).await;
    let direct = unfenced
        .execute("INSERT INTO events_2026 VALUES (1, '2026-03-01')", &[])
        .await;
    assert_eq!(sqlstate(direct), "LW002");
    db.uninstall(&["stock".into(), "events".into()], false)
        .await
        .unwrap();
    assert_eq!(count(), "0");
    assert!(db.guarded().await.unwrap().is_empty());
    db.install(&["stock".into()], "inventory", Unfenced::Refuse, None)
        .await
        .unwrap();
    assert_eq!(count(), "1");
    // Purging refuses while a table is guarded, and then drops the schema.
    assert!(matches!(
        db.uninstall(&[], true).await,
        Err(Error::InvalidArgument { .. })
    ));
    db.uninstall(&["stock".into()], true).await.unwrap();
    assert_eq!(
        server.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'lockward'"),
        "0"
    );
    // A table that does not exist is named.
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
    let server = PostgresServer::start();
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
        let a = writer(&server, Some(&format!("inventory={old}"))).await;
        a.batch_execute(&format!("BEGIN ISOLATION LEVEL {level}"))
            .await
            .unwrap();
        a.execute(
            "INSERT INTO stock VALUES ($1, 1) ON CONFLICT (sku) DO UPDATE SET n = stock.n + 1",
            &[&format!("a-{round}")],
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
        let waiting = "SELECT count(*) FROM pg_stat_activity \
                       WHERE wait_event_type = 'Lock' AND query LIKE '%lockward.claim%'";
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while server.psql(waiting) != "1" {
            assert!(std::time::Instant::now() < until, "the claim never waited");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!claim.is_finished());
        a.batch_execute("COMMIT").await.unwrap();
        assert_eq!(claim.await.unwrap().unwrap(), new);
        // What the old holder committed before the claim is there.
        assert_eq!(
            server.psql(&format!("SELECT n FROM stock WHERE sku = 'a-{round}'")),
            "1"
        );
        // After the claim, its writes are refused.
        let late = a
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL {level}; UPDATE stock SET n = 99 WHERE sku = 'a-{round}'"
            ))
            .await;
        assert_eq!(sqlstate(late), "LW001", "{level}");
        a.batch_execute("ROLLBACK").await.unwrap();
        // Two transactions of the new holder run side by side.
        let b1 = writer(&server, Some(&format!("inventory={new}"))).await;
        let b2 = writer(&server, Some(&format!("inventory={new}"))).await;
        for b in [&b1, &b2] {
            b.batch_execute(&format!("BEGIN ISOLATION LEVEL {level}"))
                .await
                .unwrap();
        }
        b1.execute(
            "INSERT INTO stock VALUES ($1, 1)",
            &[&format!("b1-{round}")],
        )
        .await
        .unwrap();
        let second = tokio::time::timeout(
            Duration::from_secs(2),
            b2.execute(
                "INSERT INTO stock VALUES ($1, 1)",
                &[&format!("b2-{round}")],
            ),
        )
        .await
        .expect("the holder's second transaction waited on its first");
        second.unwrap();
        for b in [&b1, &b2] {
            b.batch_execute("COMMIT").await.unwrap();
        }
        // A made-up fence, above the claimed one, and none at all.
        let made_up = writer(&server, Some(&format!("inventory={}", new + 5))).await;
        let written = made_up.execute("DELETE FROM stock", &[]).await;
        assert_eq!(sqlstate(written), "LW004", "{level}");
        let none = writer(&server, None).await;
        assert_eq!(
            sqlstate(none.execute("DELETE FROM stock", &[]).await),
            "LW002"
        );
        assert_eq!(sqlstate(none.execute("TRUNCATE stock", &[]).await), "LW002");
    }
    // A claim below the stored fence is the claim of a holder that lost.
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
async fn a_claim_held_up_too_long_times_out_naming_the_session() {
    let server = PostgresServer::start();
    let db = guarded_table(&server, Unfenced::Refuse).await;
    db.claim("inventory", 3, Duration::from_secs(5))
        .await
        .unwrap();
    let stuck = open_writer(&server, "stuck-job", "x").await;
    let timed_out = db.claim("inventory", 4, Duration::from_millis(600)).await;
    match timed_out {
        Err(Error::TimedOut { name, .. }) => assert!(name.contains("stuck-job"), "{name}"),
        other => panic!("expected TimedOut, got {other:?}"),
    }
    stuck.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        db.claim("inventory", 4, Duration::from_secs(5))
            .await
            .unwrap(),
        4
    );
}

#[tokio::test]
async fn ending_stale_sessions_lets_the_claim_through_and_rolls_them_back() {
    let server = PostgresServer::start();
    let db = guarded_table(&server, Unfenced::Refuse).await;
    db.claim("inventory", 3, Duration::from_secs(5))
        .await
        .unwrap();
    let stuck = open_writer(&server, "paused-job", "half-done").await;
    let (stored, ended) = db
        .claim_ending_stale("inventory", 4, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(stored, 4);
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert!(
        ended[0].contains("paused-job") && ended[0].contains("ended"),
        "{ended:?}"
    );
    // The paused holder's connection is gone, and its write with it.
    assert!(stuck.batch_execute("COMMIT").await.is_err());
    assert_eq!(
        server.psql("SELECT count(*) FROM stock WHERE sku = 'half-done'"),
        "0"
    );
}

#[tokio::test]
async fn unfenced_writes_pass_when_allowed_and_fences_are_shown() {
    let server = PostgresServer::start();
    let db = guarded_table(&server, Unfenced::Allow).await;
    let none = writer(&server, None).await;
    none.execute("INSERT INTO stock VALUES ('free', 1)", &[])
        .await
        .unwrap();
    // A fence that is given is still checked.
    db.claim("inventory", 8, Duration::from_secs(5))
        .await
        .unwrap();
    let old = writer(&server, Some("inventory=7")).await;
    assert_eq!(
        sqlstate(old.execute("DELETE FROM stock", &[]).await),
        "LW001"
    );
    let fences = db.fences().await.unwrap();
    assert_eq!(fences.len(), 1);
    assert_eq!((fences[0].lock.as_str(), fences[0].fence), ("inventory", 8));
    assert_eq!(fences[0].raised_by, "postgres");
    // A repair may set it lower.
    db.reset("inventory", 2).await.unwrap();
    assert_eq!(db.fences().await.unwrap()[0].fence, 2);
}

#[tokio::test]
async fn psql_is_fenced_through_pgoptions() {
    let server = PostgresServer::start();
    let db = guarded_table(&server, Unfenced::Refuse).await;
    db.claim("inventory", 12, Duration::from_secs(5))
        .await
        .unwrap();
    let psql = |fence: Option<u64>| {
        let mut cmd = std::process::Command::new("psql");
        cmd.arg(server.url()).args([
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            "INSERT INTO stock VALUES ('p', 1) ON CONFLICT (sku) DO UPDATE SET n = stock.n + 1",
        ]);
        match fence {
            Some(fence) => cmd.env("PGOPTIONS", session_options(&[("inventory", fence)])),
            None => cmd.env_remove("PGOPTIONS"),
        };
        cmd.output().unwrap()
    };
    let current = psql(Some(12));
    assert!(current.status.success(), "{current:?}");
    let stale = psql(Some(11));
    assert!(!stale.status.success());
    let said = String::from_utf8_lossy(&stale.stderr);
    assert!(
        said.contains("stale fence 11 for lock inventory: fence 12"),
        "{said}"
    );
    let bare = psql(None);
    assert!(
        String::from_utf8_lossy(&bare.stderr).contains("carries no fence"),
        "{bare:?}"
    );
    assert_eq!(server.psql("SELECT n FROM stock WHERE sku = 'p'"), "1");
}
