//! Fences never go back when Redis loses its last writes: a replica
//! promoted before it had the last grants, a restart from the last
//! snapshot. Each grant's fence is `max(counter + 1, the server's clock in
//! µs)`, so a counter that came back older than the fences already granted
//! is overtaken by the clock (see `NEXT_FENCE` in the Redis backend).

use std::time::Duration;

use lockward::recipe::{RwLock, Semaphore};
use lockward::{LockOptions, Renewal, Store};
use lockward_testkit::RedisServer;

fn opts() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(30))
        .renewal(Renewal::Off)
}

/// The fences of one grant of each kind that draws one (a lock, a
/// semaphore permit, a reader), each released after.
async fn grant_each(store: &Store) -> [u64; 3] {
    let lock = store.try_acquire("lost-writes", &opts()).await.unwrap();
    let fence = lock.fence();
    lock.release().await.unwrap();
    let semaphore = Semaphore::new(store.clone(), "lost-writes-sem", 2).unwrap();
    let permit = semaphore.try_acquire(&opts()).await.unwrap();
    let permit_fence = permit.guard().fence();
    permit.release().await.unwrap();
    let rw = RwLock::new(store.clone(), "lost-writes-rw").unwrap();
    let reader = rw.try_read(&opts()).await.unwrap();
    let read_fence = reader.fence();
    reader.release().await.unwrap();
    [fence, permit_fence, read_fence]
}

/// Grants `n` rounds; the highest fence of each kind.
async fn grant_rounds(store: &Store, n: usize) -> [u64; 3] {
    let mut most = [0; 3];
    for _ in 0..n {
        for (m, f) in most.iter_mut().zip(grant_each(store).await) {
            assert!(f > *m, "fences must grow: {f} after {m}");
            *m = f;
        }
    }
    most
}

fn assert_above(after: [u64; 3], before: [u64; 3], what: &str) {
    for (kind, (a, b)) in ["lock", "permit", "reader"]
        .iter()
        .zip(after.iter().zip(before))
    {
        assert!(
            *a > b,
            "{what}: a {kind}'s fence {a} is not above {b}, granted before the loss"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_promoted_before_it_had_the_last_grants_never_repeats_a_fence() {
    let mut primary = RedisServer::start();
    let replica = RedisServer::start();
    tokio::task::block_in_place(|| replica.replicate(&primary));
    let store = Store::open(&primary.url()).await.unwrap();
    grant_rounds(&store, 3).await;
    // Every grant so far reached the replica; then it falls behind.
    assert_eq!(primary.cli(&["WAIT", "1", "5000"]), "1");
    replica.pause();
    let granted = grant_rounds(&store, 3).await;
    drop(store);
    primary.kill9();
    replica.resume();
    replica.cli(&["REPLICAOF", "NO", "ONE"]);
    let promoted = Store::open(&replica.url()).await.unwrap();
    let after = grant_each(&promoted).await;
    assert_above(after, granted, "after the promotion");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_from_the_last_snapshot_never_repeats_a_fence() {
    let mut server = RedisServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    grant_rounds(&store, 3).await;
    // The snapshot has the counters as they are now; three more rounds are
    // lost with the kill.
    assert_eq!(server.cli(&["SAVE"]), "OK");
    let granted = grant_rounds(&store, 3).await;
    drop(store);
    tokio::task::block_in_place(|| server.restart());
    assert_eq!(
        server.cli(&["EXISTS", "lockward:lost-writes:fence"]),
        "1",
        "the snapshot did not come back"
    );
    let store = Store::open(&server.url()).await.unwrap();
    let after = grant_each(&store).await;
    assert_above(after, granted, "after the restart");
}
