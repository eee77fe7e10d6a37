//! PostgreSQL-specific behaviour: advisory locks die with their session,
//! lease mode's waiters take turns through the server's lock queue (in
//! order, a stuck holder taken over at its expiry, the line moving on
//! through a crash of the server), unreachable servers and wrong passwords
//! are clear errors.

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
    // The driver's error is kept as the cause.
    assert!(std::error::Error::source(&err).is_some(), "{err:?}");
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
    assert!(matches!(err, lockward::Error::Denied { .. }), "{shown}");
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
    // Freed in place: no owner, expired now.
    assert_eq!(
        server.psql(
            "SELECT owner = '' AND expires_at <= now() FROM lockward_locks WHERE name = 'clock'"
        ),
        "t"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_in_lease_mode_queue_in_the_server_in_order() {
    let server = PostgresServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let holder = store.acquire("hot", &LockOptions::new()).await.unwrap();
    // A store each, as separate processes would have; each joins after the
    // one before.
    let mut waiters = Vec::new();
    for joined in 0..5 {
        let store = Store::open(&server.url()).await.unwrap();
        waiters.push(tokio::spawn(async move {
            let g = store
                .acquire("hot", &LockOptions::new().wait(Duration::from_secs(20)))
                .await
                .unwrap();
            let (got, fence) = (Instant::now(), g.fence());
            tokio::time::sleep(Duration::from_millis(20)).await;
            g.release().await.unwrap();
            (got, joined, fence)
        }));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Four wait for the baton in the server's lock queue; the fifth has it
    // and, as the holder took the lock without it, listens for that
    // holder's release: the only session listening.
    let queued = server.psql(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'",
    );
    let activity = || server.psql("SELECT pid, state, wait_event, query FROM pg_stat_activity");
    assert_eq!(queued, "4", "{}", activity());
    let listening = server.psql(
        "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()",
    );
    assert_eq!(listening, "1", "{}", activity());
    let released = Instant::now();
    holder.release().await.unwrap();
    let mut grants = Vec::new();
    for w in waiters {
        grants.push(w.await.unwrap());
    }
    grants.sort();
    // Granted in the order they joined, with growing fences.
    let order: Vec<usize> = grants.iter().map(|g| g.1).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4], "{grants:?}");
    assert!(grants.windows(2).all(|w| w[0].2 < w[1].2), "{grants:?}");
    // After the first (polled), each handoff is the server's: the next
    // waiter is woken by the baton, not by a poll.
    let gaps: Vec<Duration> = grants
        .windows(2)
        .map(|w| w[1].0.duration_since(w[0].0))
        .collect();
    eprintln!(
        "first grant {:?} after the release; gaps between holders {gaps:?}",
        grants[0].0.duration_since(released)
    );
    assert!(
        gaps.iter().all(|g| *g < Duration::from_millis(200)),
        "{gaps:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_holder_keeping_the_baton_is_taken_over_at_its_expiry() {
    let server = PostgresServer::start();
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
    assert!(after >= Duration::from_millis(950), "{after:?}");
    assert!(after < Duration::from_millis(1_600), "{after:?}");
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_session_ends_leaves_the_line_and_the_rest_go_on() {
    let server = PostgresServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let holder = store.acquire("cut", &LockOptions::new()).await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let store = Store::open(&server.url()).await.unwrap();
        waiters.push(tokio::spawn(async move {
            let g = store
                .acquire("cut", &LockOptions::new().wait(Duration::from_secs(20)))
                .await?;
            g.release().await
        }));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The session of the second in line (the first waiting in the queue)
    // ends, as when a proxy cuts it: that waiter rejoins at the back.
    let cut = server.psql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'
         ORDER BY backend_start LIMIT 1",
    );
    assert_eq!(cut, "t");
    let released = Instant::now();
    holder.release().await.unwrap();
    for w in waiters {
        tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .expect("a waiter never got the lock")
            .unwrap()
            .unwrap();
    }
    eprintln!(
        "all three served {:?} after the release",
        released.elapsed()
    );
    assert!(released.elapsed() < Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_line_moves_on_after_a_kill_of_the_server_while_64_wait() {
    let mut server = PostgresServer::start_durable();
    let holder_store = Store::open(&server.url()).await.unwrap();
    let ttl = Duration::from_secs(2);
    let held = holder_store
        .acquire("crash", &LockOptions::new().ttl(ttl))
        .await
        .unwrap();
    // A store each, as 64 processes would have (one store's own waiters
    // queue in the process first).
    let mut waiters = Vec::new();
    for _ in 0..64 {
        let store = Store::open(&server.url()).await.unwrap();
        waiters.push(tokio::spawn(async move {
            let g = store
                .acquire("crash", &LockOptions::new().wait(Duration::from_secs(60)))
                .await?;
            let fence = g.fence();
            tokio::time::sleep(Duration::from_millis(5)).await;
            g.release().await?;
            Ok::<u64, Error>(fence)
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let queued = server.psql(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'",
    );
    assert_eq!(queued, "63");
    let held_fence = held.fence();
    server.restart();
    let restarted = Instant::now();
    // The holder's process lives on; its row outlived the crash and ends
    // with its lease (it renews after the restart, then lets go).
    held.release().await.ok();
    let mut fences = Vec::new();
    for w in waiters {
        let fence = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("a waiter never got the lock")
            .unwrap()
            .unwrap();
        fences.push(fence);
    }
    eprintln!("64 served {:?} after the restart", restarted.elapsed());
    fences.sort();
    fences.dedup();
    assert_eq!(fences.len(), 64, "every waiter got its own fence");
    assert!(fences[0] > held_fence);
}
