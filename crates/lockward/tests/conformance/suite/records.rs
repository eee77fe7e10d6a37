//! Records: insert-if-absent, put, the point read, listing, expiry, and
//! versioned compare-and-set.

use std::time::Duration;

use lockward::Error;

use super::{short, unique, Fixture};

/// The record store recipes use (the cron ledger): insert only if absent,
/// overwrite, list by prefix, expire; records never touch locks.
pub async fn records(f: &dyn Fixture) {
    let store = f.store().await;
    let backend = store.backend().clone();
    let prefix = unique("ledger");
    let key = |k: &str| lockward::Name::new(format!("{prefix}/{k}")).unwrap();
    let long = Duration::from_secs(60);
    assert!(backend
        .insert_record(&key("a"), "first", long)
        .await
        .unwrap());
    assert!(
        !backend
            .insert_record(&key("a"), "second", long)
            .await
            .unwrap(),
        "inserted twice"
    );
    backend.put_record(&key("b"), "x", long).await.unwrap();
    backend
        .put_record(&key("b"), "y:with/odd%chars", long)
        .await
        .unwrap();
    let all = backend.records(&prefix).await.unwrap();
    assert_eq!(
        all,
        vec![
            (format!("{prefix}/a"), "first".to_string()),
            (format!("{prefix}/b"), "y:with/odd%chars".to_string())
        ]
    );
    assert_eq!(
        backend.records(&format!("{prefix}/b")).await.unwrap().len(),
        1
    );
    // A lock of the same name is unaffected, and lists no records.
    let g = store
        .try_acquire(format!("{prefix}/a"), &short(5_000))
        .await
        .unwrap();
    assert_eq!(store.list(&prefix).await.unwrap().len(), 1);
    g.release().await.unwrap();
    // Expiry.
    let ttl = Duration::from_millis(300).max(f.server_ttl_floor() / 2);
    assert!(backend
        .insert_record(&key("c"), "gone soon", ttl)
        .await
        .unwrap());
    tokio::time::sleep(ttl + f.server_ttl_floor() / 2 + Duration::from_millis(300)).await;
    assert!(
        backend
            .records(&format!("{prefix}/c"))
            .await
            .unwrap()
            .is_empty(),
        "record outlived its TTL"
    );
    assert!(backend
        .insert_record(&key("c"), "again", long)
        .await
        .unwrap());
}

/// A versioned record: a write names the version it read; a stale version
/// is refused, and versions only grow.
pub async fn versioned_records_compare_and_set(f: &dyn Fixture) {
    let store = f.store().await;
    let backend = store.backend();
    let key = lockward::Name::new(unique("stock")).unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(backend.read_versioned(&key).await.unwrap(), None);
    let v1 = backend
        .write_versioned(&key, 0, "5", ttl)
        .await
        .unwrap()
        .expect("created");
    assert_eq!(
        backend.write_versioned(&key, 0, "9", ttl).await.unwrap(),
        None,
        "created twice"
    );
    let read = backend.read_versioned(&key).await.unwrap().unwrap();
    assert_eq!((read.value.as_str(), read.version), ("5", v1));
    let v2 = backend
        .write_versioned(&key, v1, "4", ttl)
        .await
        .unwrap()
        .expect("updated");
    assert!(v2 > v1);
    assert_eq!(
        backend.write_versioned(&key, v1, "3", ttl).await.unwrap(),
        None,
        "stale write accepted"
    );
    assert_eq!(
        backend.read_versioned(&key).await.unwrap().unwrap().value,
        "4"
    );
    // A versioned record is not a plain record, nor a lock.
    assert!(backend.records(key.as_str()).await.unwrap().is_empty());
    assert!(store.inspect(key.as_str()).await.unwrap().is_none());
}

/// Where the store declares `permanent_records`, a permanent record and a
/// permanent idempotency result are kept (and read back by key); elsewhere
/// both are refused with `NotSupported`, before anything runs.
pub async fn permanent_records_are_kept_or_refused(f: &dyn Fixture) {
    use lockward::recipe::Idempotency;
    let store = f.store().await;
    let key = unique("forever");
    let ran = std::sync::atomic::AtomicBool::new(false);
    let keys = Idempotency::new(store.clone()).permanent();
    let outcome = keys
        .run(&key, || async {
            ran.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, std::io::Error>("paid".to_string())
        })
        .await;
    if store.capabilities().permanent_records {
        store.put_permanent_record(&key, "kept").await.unwrap();
        assert_eq!(store.record(&key).await.unwrap().as_deref(), Some("kept"));
        assert!(outcome.is_ok(), "{outcome:?}");
        assert_eq!(keys.result(&key).await.unwrap().as_deref(), Some("paid"));
        let listed = store.records(&key).await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
    } else {
        let refused = store.put_permanent_record(&key, "kept").await;
        assert!(
            matches!(refused, Err(Error::NotSupported { .. })),
            "{refused:?}"
        );
        assert!(
            matches!(
                outcome,
                Err(lockward::recipe::IdempotencyError::Store(
                    Error::NotSupported { .. }
                ))
            ),
            "{outcome:?}"
        );
        assert!(
            !ran.load(std::sync::atomic::Ordering::SeqCst),
            "ran before refusing"
        );
        assert_eq!(store.record(&key).await.unwrap(), None);
    }
}
