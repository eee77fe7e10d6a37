//! MySQL-specific behaviour (on MariaDB): expiry on the server's clock,
//! fences across a kill -9 and restart, a waiter riding out the outage,
//! unreachable servers and wrong passwords as clear errors.

use std::time::{Duration, Instant};

use lockward::{Error, LockOptions, Store};
use lockward_testkit::MariadbServer;

#[tokio::test]
async fn server_down_is_unavailable_quickly() {
    let port = lockward_testkit::free_port();
    let began = Instant::now();
    let err = Store::open(&format!("mysql://app:secret@127.0.0.1:{port}/shop"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    // The driver's error is kept as the cause.
    assert!(std::error::Error::source(&err).is_some(), "{err:?}");
    let shown = format!("{err} {err:?}");
    assert!(shown.contains(&port.to_string()), "{shown}");
    assert!(!shown.contains("secret"), "{shown}");
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test]
async fn wrong_password_is_clear_and_not_printed() {
    let server = MariadbServer::start();
    let err = Store::open(&format!(
        "mysql://lockward:wrong-pass@{}/lockward",
        server.addr()
    ))
    .await
    .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(matches!(err, lockward::Error::Denied { .. }), "{shown}");
    assert!(shown.contains("authentication failed"), "{shown}");
    assert!(!shown.contains("wrong-pass"), "{shown}");
    // mariadb:// is the same store.
    let store = Store::open(&server.url().replace("mysql://", "mariadb://"))
        .await
        .unwrap();
    assert_eq!(store.capabilities(), lockward::backend::mysql::CAPABILITIES);
}

#[tokio::test]
async fn lease_rows_use_the_servers_clock_and_keep_their_fence() {
    let server = MariadbServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let guard = store
        .try_acquire("clock", &LockOptions::new().ttl(Duration::from_secs(30)))
        .await
        .unwrap();
    // The expiry stored is the server's UTC now + TTL.
    let left: f64 = server
        .sql("SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1e6 FROM lockward.lockward_locks WHERE name = 'clock'")
        .parse()
        .unwrap();
    assert!(left > 28.0 && left <= 30.0, "{left}");
    let fence = guard.fence();
    guard.release().await.unwrap();
    // The row stays, free, with its fence: the next holder's is larger.
    assert_eq!(
        server.sql("SELECT owner = '', fence FROM lockward.lockward_locks WHERE name = 'clock'"),
        format!("1\t{fence}")
    );
    let next = store
        .try_acquire("clock", &LockOptions::new())
        .await
        .unwrap();
    assert!(next.fence() > fence, "{} after {fence}", next.fence());
    // Names compare byte for byte: no case folding, no trailing-space padding.
    for other in ["Clock", "clock "] {
        let g = store.try_acquire(other, &LockOptions::new()).await.unwrap();
        g.release().await.unwrap();
    }
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_survive_a_kill_and_a_waiter_rides_out_the_outage() {
    let mut server = MariadbServer::start_durable();
    for mode in ["lease", "named"] {
        let url = format!("{}?mode={mode}", server.url());
        let store = Store::open(&url).await.unwrap();
        let mut last = 0;
        for _ in 0..5 {
            let g = store.acquire("ledger", &LockOptions::new()).await.unwrap();
            assert!(g.fence() > last, "{mode}");
            last = g.fence();
            g.release().await.unwrap();
        }
        // A holder that dies with the server, unrenewed: a lease passes on
        // at its TTL, a named lock with its session.
        let opts = LockOptions::new()
            .ttl(Duration::from_secs(2))
            .renewal(lockward::Renewal::Off);
        let held = store.acquire("ledger", &opts).await.unwrap();
        last = held.fence();
        std::mem::forget(held);
        let waiter_store = Store::open(&url).await.unwrap();
        let waiter = tokio::spawn(async move {
            let began = Instant::now();
            let g = waiter_store
                .acquire("ledger", &LockOptions::new().wait(Duration::from_secs(30)))
                .await;
            (g, began.elapsed())
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.kill9();
        tokio::time::sleep(Duration::from_secs(1)).await;
        tokio::task::block_in_place(|| server.restart());
        let (granted, waited) = tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("the waiter never got the lock")
            .unwrap();
        let granted = granted.unwrap_or_else(|e| panic!("{mode}: the waiter gave up: {e}"));
        eprintln!(
            "{mode}: waiter granted after {waited:?}, fence {} (last {last})",
            granted.fence()
        );
        assert!(
            granted.fence() > last,
            "{mode}: {} <= {last}",
            granted.fence()
        );
        granted.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_session_passes_its_named_lock_on_at_once() {
    let server = MariadbServer::start();
    let url = format!("{}?mode=named", server.url());
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
    // The holder's session, as a crashed client's would end.
    let session = server.sql("SELECT session FROM lockward.lockward_named WHERE name = 'ledger'");
    server.sql(&format!("KILL {session}"));
    let killed = Instant::now();
    let b = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter never got the lock")
        .unwrap()
        .unwrap();
    eprintln!("next waiter acquired {:?} after KILL", killed.elapsed());
    assert!(
        killed.elapsed() < Duration::from_secs(1),
        "{:?}",
        killed.elapsed()
    );
    assert!(b.fence() > a.fence());
    // The holder learns at its next renewal (TTL/3).
    let reason = tokio::time::timeout(Duration::from_secs(2), a.lost())
        .await
        .expect("lost() did not fire");
    assert!(
        matches!(
            reason,
            lockward::LostReason::TakenOver | lockward::LostReason::SessionEnded
        ),
        "{reason:?}"
    );
    b.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_in_lease_mode_queue_in_the_server_and_one_polls() {
    let server = MariadbServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let holder = store.acquire("hot", &LockOptions::new()).await.unwrap();
    // A store each, as separate processes would have (one store's own
    // waiters queue in the process, and only the first reaches the server).
    let mut stores = Vec::new();
    for _ in 0..5 {
        stores.push(Store::open(&server.url()).await.unwrap());
    }
    let waiters: Vec<_> = stores
        .into_iter()
        .map(|store| {
            tokio::spawn(async move {
                let g = store
                    .acquire("hot", &LockOptions::new().wait(Duration::from_secs(20)))
                    .await
                    .unwrap();
                let (fence, got) = (g.fence(), Instant::now());
                tokio::time::sleep(Duration::from_millis(20)).await;
                g.release().await.unwrap();
                (fence, got)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    // Four wait for the baton in the server; the fifth has it and polls.
    let queued =
        server.sql("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock'");
    assert_eq!(
        queued,
        "4",
        "{}",
        server.sql("SELECT ID, COMMAND, STATE, INFO FROM information_schema.PROCESSLIST")
    );
    let released = Instant::now();
    holder.release().await.unwrap();
    let mut grants = Vec::new();
    for w in waiters {
        grants.push(w.await.unwrap());
    }
    grants.sort();
    assert!(grants.windows(2).all(|w| w[0].0 < w[1].0), "{grants:?}");
    // After the first (polled), each handoff is the server's: the next
    // waiter is woken by the baton, not by its next poll.
    let gaps: Vec<Duration> = grants
        .windows(2)
        .map(|w| w[1].1.duration_since(w[0].1))
        .collect();
    eprintln!(
        "first grant {:?} after the release; gaps between holders {gaps:?}",
        grants[0].1.duration_since(released)
    );
    assert!(
        gaps.iter().all(|g| *g < Duration::from_millis(200)),
        "{gaps:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_holder_keeping_the_baton_is_taken_over_at_its_expiry() {
    let server = MariadbServer::start();
    let (a, b, c) = (
        Store::open(&server.url()).await.unwrap(),
        Store::open(&server.url()).await.unwrap(),
        Store::open(&server.url()).await.unwrap(),
    );
    let first = a.acquire("stuck", &LockOptions::new()).await.unwrap();
    // B waits, so it takes the lock with the baton, and then gets stuck:
    // unrenewed, never released, its session (and the baton) alive.
    let stuck_opts = LockOptions::new()
        .ttl(Duration::from_secs(1))
        .renewal(lockward::Renewal::Off)
        .wait(Duration::from_secs(10));
    let waiting = tokio::spawn(async move {
        let g = b.acquire("stuck", &stuck_opts).await.unwrap();
        let at = Instant::now();
        std::mem::forget(g);
        (b, at)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.release().await.unwrap();
    let (_b, granted_at) = waiting.await.unwrap();
    let next = c
        .acquire("stuck", &LockOptions::new().wait(Duration::from_secs(10)))
        .await
        .unwrap();
    let after = granted_at.elapsed();
    eprintln!("taken over {after:?} after the stuck holder's grant (lease 1 s)");
    assert!(after < Duration::from_millis(1_600), "{after:?}");
    next.release().await.unwrap();
}
