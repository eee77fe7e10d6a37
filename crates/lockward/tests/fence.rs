//! Fenced writes on every resource: stale tokens refused, larger and equal
//! accepted, concurrent writers with interleaved tokens end with the value
//! of the largest.

use std::sync::Arc;

use lockward::fence::{FencedResource, MemoryRegister};
use lockward::Error;

async fn check(resource: Arc<dyn FencedResource>) {
    let key = format!("k-{}", lockward::OwnerId::random());
    resource.write(&key, b"first", 10).await.unwrap();
    resource
        .write(&key, b"again", 10)
        .await
        .expect("the same holder writes again");
    resource.write(&key, b"newer", 11).await.unwrap();
    match resource.write(&key, b"stale", 10).await {
        Err(Error::Stale {
            fence: 10,
            current: 11,
            ..
        }) => {}
        other => panic!("stale write: {other:?}"),
    }
    let now = resource.read(&key).await.unwrap().unwrap();
    assert_eq!((now.value.as_slice(), now.fence), (&b"newer"[..], 11));
    assert!(resource.read("never-written").await.unwrap().is_none());

    // 8 writers, tokens 1..=200 shuffled between them: the largest wins.
    let key = format!("race-{}", lockward::OwnerId::random());
    let mut tokens: Vec<u64> = (1..=200).collect();
    fastrand::shuffle(&mut tokens);
    let writers: Vec<_> = tokens
        .chunks(25)
        .map(|chunk| {
            let (resource, key, chunk) = (resource.clone(), key.clone(), chunk.to_vec());
            tokio::spawn(async move {
                for t in chunk {
                    match resource.write(&key, t.to_string().as_bytes(), t).await {
                        Ok(()) | Err(Error::Stale { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let last = resource.read(&key).await.unwrap().unwrap();
    assert_eq!((last.value.as_slice(), last.fence), (&b"200"[..], 200));

    // A claim raises the fence and keeps the value: the old holder's late
    // write is refused, and the new holder reads the last accepted value.
    let key = format!("claim-{}", lockward::OwnerId::random());
    resource.write(&key, b"7", 20).await.unwrap();
    resource.claim(&key, 21).await.unwrap();
    let claimed = resource.read(&key).await.unwrap().unwrap();
    assert_eq!((claimed.value.as_slice(), claimed.fence), (&b"7"[..], 21));
    assert!(matches!(
        resource.write(&key, b"late", 20).await,
        Err(Error::Stale {
            fence: 20,
            current: 21,
            ..
        })
    ));
    assert!(matches!(
        resource.claim(&key, 19).await,
        Err(Error::Stale { current: 21, .. })
    ));
    resource.write(&key, b"8", 21).await.unwrap();
    let fresh = format!("fresh-{}", lockward::OwnerId::random());
    resource.claim(&fresh, 5).await.unwrap();
    assert_eq!(resource.read(&fresh).await.unwrap().unwrap().fence, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_register() {
    check(Arc::new(MemoryRegister::new())).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_register() {
    let dir = tempfile::tempdir().unwrap();
    let r = lockward::fence::SqliteRegister::open(&dir.path().join("r.db"), "resources")
        .await
        .unwrap();
    check(Arc::new(r)).await;
    assert!(
        lockward::fence::SqliteRegister::open(&dir.path().join("r.db"), "x; drop")
            .await
            .is_err()
    );
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_register() {
    let server = lockward_testkit::RedisServer::start();
    let r = lockward::fence::RedisRegister::connect(&server.url(), "res:")
        .await
        .unwrap();
    check(Arc::new(r)).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_register() {
    let server = lockward_testkit::PostgresServer::start();
    let r = lockward::fence::PostgresRegister::connect(&server.url(), "resources")
        .await
        .unwrap();
    check(Arc::new(r)).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_register() {
    let server = lockward_testkit::MariadbServer::start();
    let r = lockward::fence::MysqlRegister::connect(&server.url(), "resources")
        .await
        .unwrap();
    check(Arc::new(r)).await;
    assert!(matches!(
        lockward::fence::MysqlRegister::connect(&server.url(), "x; drop").await,
        Err(Error::InvalidArgument { .. })
    ));
}
