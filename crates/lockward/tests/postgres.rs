//! PostgreSQL-specific behaviour: advisory locks die with their session,
//! unreachable servers and wrong passwords are clear errors.

use std::time::{Duration, Instant};

use lockward::fence::{FencedResource, PostgresRegister};
use lockward::{Error, LockOptions, LostReason, Store};
use lockward_testkit::PostgresServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_session_loses_the_advisory_lock_to_the_next_waiter() {
    let server = PostgresServer::start();
    let url = format!("{}?mode=advisory", server.url());
    let holder_store = Store::open(&url).await.unwrap();
    let opts = LockOptions::new().ttl(Duration::from_millis(600));
    let a = holder_store.acquire("ledger", &opts).await.unwrap();
    let waiter_store = Store::open(&url).await.unwrap();
    let waiter = tokio::spawn(async move {
        waiter_store
            .acquire("ledger", &LockOptions::new().wait(Duration::from_secs(10)))
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pid = server.psql("SELECT pid FROM lockward_advisory WHERE name = 'ledger'");
    assert_eq!(
        server.psql(&format!("SELECT pg_terminate_backend({pid})")),
        "t"
    );
    let killed = Instant::now();
    let b = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter never got the lock")
        .unwrap()
        .unwrap();
    eprintln!(
        "next waiter acquired {:?} after pg_terminate_backend",
        killed.elapsed()
    );
    assert!(b.fence() > a.fence());
    // The holder learns at its next renewal (TTL/3).
    let reason = tokio::time::timeout(Duration::from_secs(2), a.lost())
        .await
        .expect("lost() did not fire");
    assert_eq!(reason, LostReason::TakenOver);
    // And its late write is refused by the fenced table.
    let ledger = PostgresRegister::connect(&server.url(), "ledger")
        .await
        .unwrap();
    ledger.write("balance", b"b", b.fence()).await.unwrap();
    assert!(matches!(
        ledger.write("balance", b"a", a.fence()).await,
        Err(Error::Stale { .. })
    ));
    b.release().await.unwrap();
}

#[tokio::test]
async fn server_down_is_unavailable_quickly() {
    let port = lockward_testkit::free_port();
    let began = Instant::now();
    let err = Store::open(&format!(
        "postgres://postgres:secret@127.0.0.1:{port}/postgres"
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    let shown = format!("{err} {err:?}");
    assert!(shown.contains(&port.to_string()), "{shown}");
    assert!(!shown.contains("secret"), "{shown}");
    assert!(
        began.elapsed() < Duration::from_secs(8),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test]
async fn wrong_password_is_clear_and_not_printed() {
    let server = PostgresServer::start();
    let err = Store::open(&format!(
        "postgres://postgres:wrong-pass@{}/postgres",
        server.addr()
    ))
    .await
    .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(shown.contains("authentication failed"), "{shown}");
    assert!(!shown.contains("wrong-pass"), "{shown}");
}

#[tokio::test]
async fn lease_rows_use_the_servers_clock() {
    let server = PostgresServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let guard = store
        .try_acquire("clock", &LockOptions::new().ttl(Duration::from_secs(30)))
        .await
        .unwrap();
    // The expiry stored is the server's now() + TTL.
    let left: f64 = server
        .psql("SELECT extract(epoch FROM expires_at - now()) FROM lockward_locks WHERE name = 'clock'")
        .parse()
        .unwrap();
    assert!(left > 28.0 && left <= 30.0, "{left}");
    assert_eq!(
        server.psql("SELECT fence FROM lockward_locks WHERE name = 'clock'"),
        guard.fence().to_string()
    );
    guard.release().await.unwrap();
    assert_eq!(
        server.psql("SELECT count(*) FROM lockward_locks WHERE name = 'clock'"),
        "0"
    );
}
