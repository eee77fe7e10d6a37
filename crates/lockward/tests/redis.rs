//! Redis-specific behaviour: restarts, persistence, credentials, foreign
//! keys, interoperability with plain `SET NX PX` clients, namespacing.

use std::time::{Duration, Instant};

use lockward::{Error, LockOptions, Renewal, Store};
use lockward_testkit::{RedisOptions, RedisServer};

fn opts(ttl_ms: u64) -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_millis(ttl_ms))
        .renewal(Renewal::Off)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_recovers_from_a_restart_and_fences_keep_increasing() {
    let mut server = RedisServer::start_with(RedisOptions {
        persistent: true,
        ..Default::default()
    });
    let store = Store::open(&server.url()).await.unwrap();
    let holder = store.try_acquire("restart", &opts(1_500)).await.unwrap();
    let waiter_store = Store::open(&server.url()).await.unwrap();
    let waiter = tokio::spawn(async move {
        waiter_store
            .acquire("restart", &opts(5_000).wait(Duration::from_secs(20)))
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.kill9();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart();
    // The persisted lock expires on the restarted server; the waiter, which
    // saw errors meanwhile, must still get it.
    let began = Instant::now();
    let next = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("waiter hung")
        .unwrap()
        .expect("waiter failed instead of recovering");
    assert!(
        next.fence() > holder.fence(),
        "{} <= {}",
        next.fence(),
        holder.fence()
    );
    eprintln!("waiter acquired {:?} after the restart", began.elapsed());
    let next_fence = next.fence();
    next.release().await.unwrap();
    // The store handle opened before the restart works again too.
    let again = store.try_acquire("restart", &opts(1_000)).await.unwrap();
    assert!(again.fence() > next_fence);
}

#[tokio::test]
async fn restart_without_persistence_still_increases_fences() {
    let mut server = RedisServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let mut last = 0;
    for _ in 0..20 {
        let g = store.try_acquire("volatile", &opts(1_000)).await.unwrap();
        assert!(g.fence() > last);
        last = g.fence();
        g.release().await.unwrap();
    }
    server.kill9();
    server.restart();
    assert_eq!(
        server.cli(&["EXISTS", "lockward:volatile:fence"]),
        "0",
        "counter survived?"
    );
    let store = Store::open(&server.url()).await.unwrap();
    let after = store.try_acquire("volatile", &opts(1_000)).await.unwrap();
    assert!(
        after.fence() > last,
        "fence went back: {} after {last}",
        after.fence()
    );
}

#[tokio::test]
async fn server_down_is_unavailable_quickly() {
    let port = lockward_testkit::free_port();
    let began = Instant::now();
    let err = Store::open(&format!("redis://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    // The driver's error is kept as the cause.
    assert!(std::error::Error::source(&err).is_some(), "{err:?}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test]
async fn wrong_password_is_clear_and_not_printed() {
    let server = RedisServer::start_with(RedisOptions {
        password: Some("right-secret".into()),
        ..Default::default()
    });
    let url = format!("redis://:wrong-secret@{}", server.addr());
    let err = Store::open(&url).await.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(matches!(err, Error::Denied { .. }), "{err:?}");
    assert!(shown.contains("authentication"), "{shown}");
    assert!(!shown.contains("wrong-secret"), "password leaked: {shown}");
    // And the right one works.
    let store = Store::open(&server.url()).await.unwrap();
    store.try_acquire("auth", &opts(1_000)).await.unwrap();
}

#[tokio::test]
async fn foreign_values_are_reported_and_left_alone() {
    let server = RedisServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    server.cli(&["SET", "lockward:forever", "not-a-lock"]);
    server.cli(&["HSET", "lockward:hashy", "f", "v"]);
    server.cli(&["SET", "lockward:bad-counter:fence", "banana"]);
    server.cli(&["SET", "lockward:bad-line:queue", "not-a-line"]);
    for (name, needle) in [
        ("forever", "without expiry"),
        ("hashy", "hash"),
        ("bad-counter", "not a number"),
        ("bad-line", "line of waiters"),
    ] {
        match store.try_acquire(name, &opts(1_000)).await {
            Err(Error::Protocol { message, .. }) => assert!(message.contains(needle), "{message}"),
            other => panic!("{name}: {other:?}"),
        }
    }
    assert_eq!(server.cli(&["GET", "lockward:forever"]), "not-a-lock");
    assert_eq!(server.cli(&["HGET", "lockward:hashy", "f"]), "v");
    assert_eq!(server.cli(&["GET", "lockward:bad-counter:fence"]), "banana");
    assert_eq!(
        server.cli(&["GET", "lockward:bad-line:queue"]),
        "not-a-line"
    );
}

/// The server's clock in ms, as the line's place leases count it.
fn server_ms(server: &RedisServer) -> u64 {
    let time = server.cli(&["TIME"]);
    let mut parts = time.split_whitespace().map(|p| p.parse::<u64>().unwrap());
    let (secs, micros) = (parts.next().unwrap(), parts.next().unwrap());
    secs * 1000 + micros / 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiters_place_holds_up_the_line_no_longer_than_its_lease() {
    let server = RedisServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let holder = store.try_acquire("line", &opts(10_000)).await.unwrap();
    // What a waiter killed with SIGKILL leaves: the first place in line,
    // leased for 1.5 s more, whose owner will never come back.
    let lapses_at = server_ms(&server) + 1_500;
    let dead = "0123456789abcdef0123456789abcdef";
    server.cli(&["ZADD", "lockward:line:queue", "1", dead]);
    server.cli(&["ZADD", "lockward:line:places", &lapses_at.to_string(), dead]);
    let waiter_store = Store::open(&server.url()).await.unwrap();
    let waiter = tokio::spawn(async move {
        let g = waiter_store
            .acquire("line", &opts(5_000).wait(Duration::from_secs(10)))
            .await
            .unwrap();
        (Instant::now(), g)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let info = store.inspect("line").await.unwrap().unwrap();
    assert_eq!(
        info.waiters,
        Some(2),
        "the dead place and the waiter: {info:?}"
    );
    holder.release().await.unwrap();
    let released = Instant::now();
    let (acquired, guard) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the dead place blocked the line past its lease")
        .unwrap();
    let waited = acquired - released;
    eprintln!("waited {waited:?} behind a dead place");
    // Not before the place lapsed (it was first), and soon after.
    assert!(
        waited >= Duration::from_millis(900),
        "jumped the line: {waited:?}"
    );
    assert!(waited < Duration::from_millis(2_500), "{waited:?}");
    guard.release().await.unwrap();
    assert_eq!(server.cli(&["EXISTS", "lockward:line:queue"]), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_leaves_the_line_at_once() {
    let server = RedisServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let holder = store.try_acquire("given-up", &opts(10_000)).await.unwrap();
    let impatient = Store::open(&server.url()).await.unwrap();
    let timed_out = impatient
        .acquire("given-up", &opts(10_000).wait(Duration::from_millis(300)))
        .await;
    assert!(
        matches!(timed_out, Err(Error::TimedOut { .. })),
        "{timed_out:?}"
    );
    // A cancelled wait leaves too.
    let cancelled = Store::open(&server.url()).await.unwrap();
    let wait = tokio::spawn(async move { cancelled.acquire("given-up", &opts(10_000)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.cli(&["ZCARD", "lockward:given-up:queue"]), "1");
    wait.abort();
    // Well before a place lease (3 s) could lapse.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.cli(&["EXISTS", "lockward:given-up:queue"]), "0");
    assert_eq!(server.cli(&["EXISTS", "lockward:given-up:places"]), "0");
    holder.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiter_gets_the_lock_after_a_restart_that_empties_the_line() {
    let mut server = RedisServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let holder = store.try_acquire("emptied", &opts(60_000)).await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..4 {
        let s = Store::open(&server.url()).await.unwrap();
        waiters.push(tokio::spawn(async move {
            let g = s
                .acquire("emptied", &opts(5_000).wait(Duration::from_secs(20)))
                .await
                .unwrap();
            let fence = g.fence();
            g.release().await.unwrap();
            fence
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.cli(&["ZCARD", "lockward:emptied:queue"]), "4");
    server.kill9();
    server.restart();
    assert_eq!(server.cli(&["EXISTS", "lockward:emptied:queue"]), "0");
    let mut fences = Vec::new();
    for w in waiters {
        let fence = tokio::time::timeout(Duration::from_secs(15), w)
            .await
            .expect("a waiter never got the lock after the restart")
            .unwrap();
        fences.push(fence);
    }
    fences.sort();
    fences.dedup();
    assert_eq!(fences.len(), 4, "{fences:?}");
    assert!(fences[0] > holder.fence());
}

#[tokio::test]
async fn plain_set_nx_clients_and_lockward_exclude_each_other() {
    let server = RedisServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    // A redis-py style holder: SET key token NX PX.
    assert_eq!(
        server.cli(&["SET", "lockward:shared", "py-token", "NX", "PX", "400"]),
        "OK"
    );
    assert!(matches!(
        store.try_acquire("shared", &opts(1_000)).await,
        Err(Error::Busy { .. })
    ));
    let info = store
        .inspect("shared")
        .await
        .unwrap()
        .expect("foreign holder visible");
    assert_eq!(info.owner, "py-token");
    assert_eq!(info.fence, None);
    // It expires; lockward waits for that (no publish) and gets it.
    let began = Instant::now();
    let g = store
        .acquire("shared", &opts(1_000).wait(Duration::from_secs(2)))
        .await
        .unwrap();
    assert!(
        began.elapsed() < Duration::from_millis(700),
        "{:?}",
        began.elapsed()
    );
    // And now the plain client is refused.
    assert_eq!(
        server.cli(&["SET", "lockward:shared", "py-token", "NX", "PX", "400"]),
        ""
    );
    assert_eq!(
        server.cli(&["GET", "lockward:shared"]),
        g.lease().owner.to_string()
    );
}

#[tokio::test]
async fn prefixes_and_databases_are_separate_namespaces() {
    let server = RedisServer::start();
    let a = Store::open(&format!("{}?prefix=app-a:", server.url()))
        .await
        .unwrap();
    let b = Store::open(&format!("{}?prefix=app-b:", server.url()))
        .await
        .unwrap();
    let db3 = Store::open(&format!("{}/3", server.url())).await.unwrap();
    let ga = a.try_acquire("job", &opts(5_000)).await.unwrap();
    let gb = b.try_acquire("job", &opts(5_000)).await.unwrap();
    let g3 = db3.try_acquire("job", &opts(5_000)).await.unwrap();
    assert_eq!(server.cli(&["EXISTS", "app-a:job"]), "1");
    assert_eq!(server.cli(&["-n", "3", "EXISTS", "lockward:job"]), "1");
    assert_eq!(a.list("").await.unwrap().len(), 1);
    // A name that looks like another name's fence key stays its own lock.
    let tricky = a.try_acquire("job:fence", &opts(5_000)).await.unwrap();
    assert!(tricky.fence() > 0);
    assert_eq!(
        server.cli(&["GET", "app-a:job:fence"]),
        ga.fence().to_string()
    );
    let names: Vec<_> = a
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, vec!["job", "job:fence"]);
    for g in [ga, gb, g3, tricky] {
        g.release().await.unwrap();
    }
}

#[tokio::test]
async fn a_user_whose_acl_lacks_what_lockward_needs_is_denied_at_once() {
    let server = RedisServer::start();
    let admin = redis::Client::open(format!("redis://{}", server.addr())).unwrap();
    let mut admin = admin.get_multiplexed_async_connection().await.unwrap();
    // May read and connect, but not run scripts or write.
    redis::cmd("ACL")
        .arg(&["SETUSER", "reader", "on", ">reader-secret", "~*"])
        .arg(&["+@read", "+@connection"])
        .query_async::<()>(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://reader:reader-secret@{}", server.addr());
    let began = Instant::now();
    let err = match Store::open(&url).await {
        Err(e) => e,
        Ok(store) => store.try_acquire("acl", &opts(1_000)).await.unwrap_err(),
    };
    assert!(matches!(err, Error::Denied { .. }), "{err:?}");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
    let shown = format!("{err} {err:?}");
    assert!(shown.contains("ACL"), "{shown}");
    assert!(!shown.contains("reader-secret"), "password leaked: {shown}");
}

/// The doctor's one finding for `check` (the first whose name ends so).
fn finding<'a>(
    report: &'a [lockward::doctor::Finding],
    check: &str,
) -> &'a lockward::doctor::Finding {
    report
        .iter()
        .find(|f| f.check.ends_with(check))
        .unwrap_or_else(|| panic!("no {check} finding in {report:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_says_what_a_crash_can_lose() {
    let primary = RedisServer::start();
    let url: lockward::StoreUrl = primary.url().parse().unwrap();
    let cases = [
        (&["CONFIG", "SET", "save", ""][..], "every lock and permit"),
        (
            &["CONFIG", "SET", "save", "3600 1"][..],
            "every grant since the last snapshot",
        ),
        (
            &["CONFIG", "SET", "appendonly", "yes"][..],
            "the last second of grants",
        ),
        (
            &["CONFIG", "SET", "appendfsync", "always"][..],
            "no acknowledged grant",
        ),
    ];
    for (command, loses) in cases {
        primary.cli(command);
        let report = lockward::doctor::diagnose(&url).await;
        let crash = finding(&report, "crash");
        assert!(crash.detail.contains(loses), "{command:?}: {crash:?}");
        assert!(crash.detail.contains("fences"), "{crash:?}");
        let safe = loses == "no acknowledged grant";
        assert_eq!(
            crash.level == lockward::doctor::Level::Ok,
            safe,
            "{crash:?}"
        );
    }
    // With a replica that a failover can promote, its lag and what a
    // failover loses.
    let replica = RedisServer::start();
    replica.replicate(&primary);
    let report = lockward::doctor::diagnose(&url).await;
    let replication = finding(&report, "replication");
    assert!(
        replication
            .detail
            .contains("1 replicas can be promoted (lag ")
            && replication.detail.contains("min-replicas-to-write 0"),
        "{replication:?}"
    );
    let crash = finding(&report, "crash");
    assert!(
        crash
            .detail
            .contains("a failover loses the grants the promoted replica had not received"),
        "{crash:?}"
    );
    assert_eq!(crash.level, lockward::doctor::Level::Warning, "{crash:?}");
}
