//! `replicas=N` on Redis: a grant is answered only once N replicas confirm
//! it (`WAIT`). With the replica running, a grant survives a kill -9 of the
//! primary and the promoted replica shows it held; with the replica
//! stopped (SIGSTOP), a grant fails within its timeout and leaves no
//! holder. Also the URL's errors.

use std::time::{Duration, Instant};

use lockward::recipe::{RwLock, Semaphore};
use lockward::{Error, LockOptions, Renewal, Store};
use lockward_testkit::RedisServer;

fn opts() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(30))
        .renewal(Renewal::Off)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmed_grant_survives_the_primary_and_an_unconfirmed_one_is_undone() {
    let mut primary = RedisServer::start();
    let replica = RedisServer::start();
    tokio::task::block_in_place(|| replica.replicate(&primary));
    let url = format!("{}?replicas=1&replicas_timeout=1500ms", primary.url());
    let store = Store::open(&url).await.unwrap();

    // Every kind of grant, and a renewal, confirmed by the replica.
    let rw = RwLock::new(store.clone(), "replicated-rw").unwrap();
    rw.try_read(&opts()).await.unwrap().release().await.unwrap();
    let semaphore = Semaphore::new(store.clone(), "replicated-sem", 2).unwrap();
    let permit = semaphore.try_acquire(&opts()).await.unwrap();
    permit.guard().extend(None).await.unwrap();
    let lock = store.try_acquire("replicated", &opts()).await.unwrap();
    lock.extend(None).await.unwrap();

    // The replica stops: a grant waits its timeout, is refused, and leaves
    // nobody holding it.
    replica.pause();
    let short = Store::open(&format!(
        "{}?replicas=1&replicas_timeout=300ms",
        primary.url()
    ))
    .await
    .unwrap();
    let began = Instant::now();
    let refused = short.try_acquire("unconfirmed", &opts()).await;
    let took = began.elapsed();
    match &refused {
        Err(Error::Unavailable { message, .. }) => assert!(
            message
                .contains("0 of the 1 replicas asked for confirmed the grant of \"unconfirmed\""),
            "{message}"
        ),
        other => panic!("a grant no replica confirmed: {other:?}"),
    }
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let plain = Store::open(&primary.url()).await.unwrap();
    assert!(plain.inspect("unconfirmed").await.unwrap().is_none());
    let sem = Semaphore::new(short.clone(), "unconfirmed-sem", 2).unwrap();
    assert!(matches!(
        sem.try_acquire(&opts()).await,
        Err(Error::Unavailable { .. })
    ));
    let held = Semaphore::new(plain.clone(), "unconfirmed-sem", 2).unwrap();
    assert_eq!(
        held.held().await.unwrap(),
        0,
        "the permit was not given back"
    );
    // A renewal nobody confirms is reported failed.
    assert!(matches!(
        lock.extend(None).await,
        Err(Error::Unavailable { .. })
    ));
    replica.resume();

    // The confirmed grant outlives the primary: the promoted replica
    // shows the lock held, with its fence, and the permit.
    lock.extend(None).await.unwrap();
    let (owner, fence) = (lock.lease().owner.to_string(), lock.fence());
    std::mem::forget(lock);
    std::mem::forget(permit);
    drop((store, short, plain, sem, held, semaphore, rw));
    primary.kill9();
    replica.cli(&["REPLICAOF", "NO", "ONE"]);
    let promoted = Store::open(&replica.url()).await.unwrap();
    let shown = promoted.inspect("replicated").await.unwrap();
    let shown = shown.expect("the promoted replica lost a confirmed grant");
    assert_eq!((shown.owner, shown.fence), (owner, Some(fence)));
    let permits = Semaphore::new(promoted.clone(), "replicated-sem", 2).unwrap();
    assert_eq!(permits.held().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_replicas_refuses_every_grant_that_asks_for_one() {
    let server = RedisServer::start();
    let store = Store::open(&format!(
        "{}?replicas=1&replicas_timeout=50ms",
        server.url()
    ))
    .await
    .unwrap();
    let refused = store.try_acquire("alone", &opts()).await;
    assert!(
        matches!(refused, Err(Error::Unavailable { .. })),
        "{refused:?}"
    );
    assert!(store.inspect("alone").await.unwrap().is_none());
}

#[tokio::test]
async fn bad_replicas_urls_say_what_is_wrong() {
    for (query, says) in [
        ("replicas=0", "1 to 64"),
        ("replicas=many", "1 to 64"),
        ("replicas=65", "1 to 64"),
        ("replicas_timeout=1s", "needs replicas=N"),
        ("replicas=1&replicas_timeout=5s", "1ms to 1500ms"),
        ("replicas=1&replicas_timeout=soon", "1ms to 1500ms"),
    ] {
        let url = format!("redis://127.0.0.1:1?{query}");
        let err = Store::open(&url).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument { .. }),
            "{query}: {err:?}"
        );
        assert!(err.to_string().contains(says), "{query}: {err}");
    }
    let err = Store::open("redis+cluster://127.0.0.1:1?replicas=1")
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not supported on a Redis Cluster"),
        "{err}"
    );
    // The URL shows them back.
    let url: lockward::StoreUrl = "redis://h:1?replicas=2&replicas_timeout=250ms"
        .parse()
        .unwrap();
    assert_eq!(
        url.to_string(),
        "redis://h:1?replicas=2&replicas_timeout=250ms"
    );
}
