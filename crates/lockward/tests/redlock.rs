//! Redlock under faults: masters killed, restarted without persistence,
//! paused.

use std::time::{Duration, Instant};

use lockward::{Error, LockOptions, Renewal, Store};
use lockward_testkit::{RedisMasters, RedisOptions};

fn opts(ttl_ms: u64) -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_millis(ttl_ms))
        .renewal(Renewal::Off)
}

fn five() -> RedisMasters {
    RedisMasters::start(5, RedisOptions::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_five_down_locks_still_work() {
    let mut masters = five();
    let store = Store::open(&masters.url()).await.unwrap();
    masters.masters()[0].kill9();
    masters.masters()[3].kill9();
    let mut last = 0;
    for _ in 0..30 {
        let g = store
            .try_acquire("minority-down", &opts(2_000))
            .await
            .unwrap();
        assert!(g.fence() > last);
        last = g.fence();
        g.release().await.unwrap();
    }
    // A store opened now, with two masters down, works too.
    let late = Store::open(&masters.url()).await.unwrap();
    late.try_acquire("minority-down", &opts(2_000))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_of_five_down_is_a_clear_error_and_never_two_holders() {
    let mut masters = five();
    let a = Store::open(&masters.url()).await.unwrap();
    let b = Store::open(&masters.url()).await.unwrap();
    let held = a.try_acquire("majority-down", &opts(10_000)).await.unwrap();
    for i in [1, 2, 4] {
        masters.masters()[i].kill9();
    }
    for store in [&a, &b] {
        match store.try_acquire("majority-down", &opts(10_000)).await {
            Err(Error::Unavailable { message, .. }) => {
                assert!(message.contains("3 of 5 masters failed"), "{message}")
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
    // The holder's lease is not extendable without a majority either.
    assert!(held.extend(None).await.is_err());
    let err = Store::open(&masters.url()).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minority_restarts_without_persistence_never_move_fences_back() {
    let mut masters = five();
    let url = masters.url();
    let worker = tokio::spawn(async move {
        let store = Store::open(&url).await.unwrap();
        let until = Instant::now() + Duration::from_secs(4);
        let mut fences = Vec::new();
        let mut failures = 0;
        while Instant::now() < until {
            match store.try_acquire("restarts", &opts(1_000)).await {
                Ok(g) => {
                    fences.push(g.fence());
                    let _ = g.release().await;
                }
                Err(_) => failures += 1,
            }
        }
        (fences, failures)
    });
    // Restart masters 0 and 1 (a minority) several times, losing their data.
    for round in 0..6 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let m = &mut masters.masters()[round % 2];
        m.kill9();
        m.restart();
    }
    let (fences, failures) = worker.await.unwrap();
    assert!(
        fences.len() > 50,
        "only {} acquisitions ({failures} failed)",
        fences.len()
    );
    for w in fences.windows(2) {
        assert!(w[0] < w[1], "fence went back: {} then {}", w[0], w[1]);
    }
    eprintln!(
        "{} acquisitions, {failures} failed attempts, fences increasing",
        fences.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_master_only_costs_the_per_node_timeout() {
    let mut masters = five();
    let store = Store::open(&masters.url()).await.unwrap();
    masters.masters()[2].pause();
    // TTL 2 s: the per-node timeout is TTL/10 = 200 ms.
    let mut worst = Duration::ZERO;
    for _ in 0..5 {
        let began = Instant::now();
        let g = store
            .try_acquire("paused-master", &opts(2_000))
            .await
            .unwrap();
        worst = worst.max(began.elapsed());
        g.release().await.unwrap();
    }
    masters.masters()[2].resume();
    eprintln!("worst acquire with one master paused: {worst:?}");
    assert!(worst < Duration::from_millis(700), "{worst:?}");
}

#[tokio::test]
async fn foreign_keys_are_reported_on_every_master() {
    let mut masters = five();
    let store = Store::open(&masters.url()).await.unwrap();
    for m in masters.masters().iter() {
        m.cli(&["SET", "lockward:forever", "x"]);
    }
    match store.try_acquire("forever", &opts(1_000)).await {
        Err(Error::Protocol { message, .. }) => {
            assert!(message.contains("without expiry"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    for m in masters.masters().iter() {
        assert_eq!(m.cli(&["GET", "lockward:forever"]), "x");
    }
}

/// A versioned write takes a write lock of its own, in a key space no user
/// lock reaches: a user lock named like it does not block the write, and
/// `list` never shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versioned_writes_stay_out_of_the_lock_namespace() {
    let masters = RedisMasters::start(3, RedisOptions::default());
    let store = Store::open(&masters.url()).await.unwrap();
    let user = store
        .try_acquire("versioned/stock", &opts(5_000))
        .await
        .unwrap();
    let version = store
        .write_versioned("stock", 0, "5", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(version.is_some(), "a user lock blocked the versioned write");
    let held: Vec<String> = store
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(held, vec!["versioned/stock".to_string()], "{held:?}");
    user.release().await.unwrap();
    let v = store.read_versioned("stock").await.unwrap().unwrap();
    assert_eq!((v.value.as_str(), Some(v.version)), ("5", version));
}
