//! Read-write locks: readers share, a writer excludes both, a waiting
//! writer goes before readers that come after it, fences order them all.

use std::time::{Duration, Instant};

use lockward::recipe::RwLock;
use lockward::{Error, Holding, LockOptions, Renewal};

use super::{unique, Fixture};

fn opts() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(10))
        .wait(Duration::from_secs(10))
}

/// Three readers on separate handles hold together; a writer is refused
/// until they are gone, then excludes readers and writers; its fence is
/// above every reader's.
pub async fn rw_lock_readers_share_and_a_writer_excludes(f: &dyn Fixture) {
    let name = unique("rw");
    let mut readers = Vec::new();
    for _ in 0..3 {
        let lock = RwLock::new(f.store().await, &name).unwrap();
        readers.push(lock.try_read(&opts()).await.expect("readers share"));
    }
    let lock = RwLock::new(f.store().await, &name).unwrap();
    match lock.readers().await {
        Ok(n) => assert_eq!(n, 3),
        Err(e) => assert!(
            f.store().await.capabilities().native_rw_lock
                && matches!(e, Error::NotSupported { .. }),
            "{e}"
        ),
    }
    // `list` shows each reader as holding a share of the lock: natively a
    // reader's row, else a slot (a lock, or permits of the store's
    // semaphore) of the readers' semaphore `NAME#readers`.
    let store = f.store().await;
    let rows = store.list(&name).await.unwrap();
    let readers_of = format!("{name}#readers");
    let shares = rows
        .iter()
        .filter(|r| match &r.holding {
            Holding::Reader { lock } => *lock == name,
            Holding::Permits { semaphore } => *semaphore == readers_of,
            Holding::Lock => r.name.starts_with(&format!("{readers_of}#permit/")),
        })
        .count();
    assert_eq!(shares, 3, "{rows:?}");
    if store.capabilities().native_rw_lock {
        assert!(
            rows.iter()
                .any(|r| r.holding == Holding::Reader { lock: name.clone() }),
            "{rows:?}"
        );
    }
    let refused = lock.try_write(&opts()).await;
    assert!(
        matches!(&refused, Err(Error::Busy { name: n }) if *n == name),
        "{refused:?}"
    );
    assert!(
        lock.try_read(&opts()).await.is_ok_and(|r| {
            drop(r);
            true
        }),
        "a reader was refused after a refused writer"
    );
    let max_read_fence = readers.iter().map(|r| r.fence()).max().unwrap();
    for r in readers {
        r.release().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let writer = lock
        .write(&opts())
        .await
        .expect("free once the readers left");
    assert!(writer.fence() > max_read_fence);
    let other = RwLock::new(f.store().await, &name).unwrap();
    assert!(matches!(
        other.try_read(&opts()).await,
        Err(Error::Busy { .. })
    ));
    assert!(matches!(
        other.try_write(&opts()).await,
        Err(Error::Busy { .. })
    ));
    writer.release().await.unwrap();
    let reader = other
        .try_read(&opts())
        .await
        .expect("free once the writer left");
    assert!(reader.fence() > max_read_fence);
    reader.release().await.unwrap();
}

/// A writer waiting for a reader is granted before a reader that came
/// after it; fences follow that order.
pub async fn rw_lock_waiting_writer_goes_before_later_readers(f: &dyn Fixture) {
    let name = unique("rw-order");
    let first = RwLock::new(f.store().await, &name).unwrap();
    let early = first.read(&opts()).await.unwrap();

    let writer_lock = RwLock::new(f.store().await, &name).unwrap();
    let writer = tokio::spawn(async move {
        let w = writer_lock.write(&opts()).await.expect("writer");
        let granted = Instant::now();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let fence = w.fence();
        let releasing = Instant::now();
        w.release().await.unwrap();
        (granted, releasing, fence)
    });
    // The writer queued: it holds the name and waits for the reader (or,
    // where the lock is native, its node is in line behind the reader's).
    let probe = f.store().await;
    let native = probe.capabilities().native_rw_lock;
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let info = probe.inspect(&name).await.unwrap();
        let queued = match (native, info) {
            (false, info) => info.is_some(),
            (true, Some(info)) => match info.waiters {
                Some(waiters) => waiters >= 1,
                // The store does not count waiters (PostgreSQL advisory
                // mode): give the writer's one request time to queue.
                None => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    true
                }
            },
            (true, None) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                true
            }
        };
        if queued {
            break;
        }
        assert!(Instant::now() < until, "the writer never queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let late_lock = RwLock::new(f.store().await, &name).unwrap();
    let late = tokio::spawn(async move {
        let r = late_lock.read(&opts()).await.expect("late reader");
        (Instant::now(), r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !writer.is_finished(),
        "the writer did not wait for the reader"
    );
    assert!(
        !late.is_finished(),
        "a later reader overtook the waiting writer"
    );
    let early_fence = early.fence();
    early.release().await.unwrap();
    let (granted, released, writer_fence) = writer.await.unwrap();
    let (late_at, late_reader) = late.await.unwrap();
    assert!(
        late_at >= released,
        "the later reader ran beside the writer"
    );
    assert!(granted < late_at);
    assert!(writer_fence > early_fence);
    assert!(late_reader.fence() > writer_fence);
    late_reader.release().await.unwrap();
}

/// Readers queued behind a writer all get in when it leaves, together (not
/// one by one as each holder leaves, which they never do here).
pub async fn rw_lock_readers_queued_behind_a_writer_get_in_together(f: &dyn Fixture) {
    let name = unique("rw-batch");
    let writer = RwLock::new(f.store().await, &name)
        .unwrap()
        .write(&opts())
        .await
        .unwrap();
    let all_in = std::sync::Arc::new(tokio::sync::Barrier::new(4));
    let mut readers = Vec::new();
    for _ in 0..3 {
        let lock = RwLock::new(f.store().await, &name).unwrap();
        let all_in = all_in.clone();
        readers.push(tokio::spawn(async move {
            let reader = lock.read(&opts()).await.expect("reader");
            all_in.wait().await;
            reader.release().await.unwrap();
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        readers.iter().all(|r| !r.is_finished()),
        "a reader got in beside the writer"
    );
    writer.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), all_in.wait())
        .await
        .expect("the queued readers did not all get in together");
    for r in readers {
        r.await.unwrap();
    }
}

/// A reader that stops renewing (a crashed process) keeps the writer out
/// only until its TTL; the writer's fence is larger than the reader's.
pub async fn rw_lock_crashed_reader_frees_after_its_ttl(f: &dyn Fixture) {
    let name = unique("rw-crash");
    let ttl = Duration::from_secs(1);
    let crashed = RwLock::new(f.store().await, &name)
        .unwrap()
        .read(&LockOptions::new().ttl(ttl).renewal(Renewal::Off))
        .await
        .unwrap();
    let read_fence = crashed.fence();
    let began = Instant::now();
    std::mem::forget(crashed);
    let writer = RwLock::new(f.store().await, &name)
        .unwrap()
        .write(&opts())
        .await
        .expect("the writer gets in after the reader's TTL");
    let waited = began.elapsed();
    assert!(
        waited + Duration::from_millis(200) >= ttl,
        "the writer got in {waited:?} after a live reader took the lock"
    );
    let floor = f.server_ttl_floor().max(ttl);
    assert!(waited < floor + Duration::from_secs(3), "{waited:?}");
    assert!(writer.fence() > read_fence);
    writer.release().await.unwrap();
}
