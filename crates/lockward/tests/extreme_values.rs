//! Values the types allow but no store can honour (`Duration::MAX`, huge
//! counts) get a typed `InvalidArgument`, never a panic, on the embedded
//! stores (the checks run before anything reaches a server).

use std::time::Duration;

use lockward::recipe::cron::{CronJob, CronOptions};
use lockward::recipe::{ElectionConfig, FixedWindow, Gcra, Idempotency, Optimistic, Semaphore};
use lockward::{Error, LockOptions, Renewal, Store};

fn invalid<T: std::fmt::Debug>(what: &str, got: lockward::Result<T>) {
    assert!(
        matches!(got, Err(Error::InvalidArgument { .. })),
        "{what}: {got:?}"
    );
}

async fn stores() -> Vec<(Store, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(&format!("sqlite://{}", dir.path().join("x.db").display()))
        .await
        .unwrap();
    vec![(Store::memory(), None), (sqlite, Some(dir))]
}

#[tokio::test]
async fn locks_refuse_durations_no_clock_can_add() {
    for (store, _dir) in stores().await {
        let max = Duration::MAX;
        invalid(
            "ttl MAX",
            store.try_acquire("a", &LockOptions::new().ttl(max)).await,
        );
        invalid(
            "wait MAX",
            store.acquire("a", &LockOptions::new().wait(max)).await,
        );
        invalid(
            "wait of 200 years",
            store
                .acquire(
                    "a",
                    &LockOptions::new().wait(Duration::from_secs(200 * 365 * 86_400)),
                )
                .await,
        );
        invalid(
            "renewal MAX",
            store
                .try_acquire("a", &LockOptions::new().renewal(Renewal::Every(max)))
                .await,
        );
        let guard = store.try_acquire("a", &LockOptions::new()).await.unwrap();
        invalid("extend MAX", guard.extend(Some(max)).await);
        invalid("Store::extend MAX", store.extend(&guard.lease(), max).await);
        guard.release().await.unwrap();
    }
}

#[tokio::test]
async fn records_refuse_retentions_no_clock_can_add() {
    for (store, _dir) in stores().await {
        let max = Duration::MAX;
        invalid("put_record MAX", store.put_record("k", "v", max).await);
        invalid(
            "insert_record MAX",
            store.insert_record("k", "v", max).await,
        );
        invalid(
            "write_versioned MAX",
            store.write_versioned("k", 0, "v", max).await,
        );
        let keys = Idempotency::new(store.clone()).retention(max);
        invalid(
            "idempotency retention MAX",
            keys.begin("k").await.map(|_| ()),
        );
        let stock = Optimistic::new(store.clone()).keep_for(max);
        invalid("optimistic keep_for MAX", stock.write("k", 0, "v").await);
        let options = CronOptions {
            retention: max,
            ..Default::default()
        };
        let job = CronJob::new(store.clone(), "j", "* * * * *", "UTC", "me", options);
        invalid("cron retention MAX", job.map(|_| ()));
    }
}

#[tokio::test]
async fn recipes_refuse_counts_and_periods_out_of_range() {
    let store = Store::memory();
    let max = Duration::MAX;
    invalid(
        "window MAX",
        FixedWindow::new(store.clone(), "w", 1, max).map(|_| ()),
    );
    invalid(
        "window limit MAX",
        FixedWindow::new(store.clone(), "w", u64::MAX, Duration::from_secs(1)).map(|_| ()),
    );
    invalid(
        "gcra period MAX",
        Gcra::new(store.clone(), "g", 1, max, 1).map(|_| ()),
    );
    invalid(
        "gcra burst MAX",
        Gcra::new(store.clone(), "g", 1, Duration::from_secs(1), u64::MAX).map(|_| ()),
    );
    invalid(
        "semaphore permits MAX",
        Semaphore::new(store.clone(), "s", u32::MAX).map(|_| ()),
    );
    let config = ElectionConfig {
        lease_duration: max,
        renew_deadline: max,
        retry_period: max,
    };
    invalid(
        "election MAX",
        lockward::recipe::Candidate::new(store.clone(), "e", "me", config).map(|_| ()),
    );
    // In range, they work.
    let limit = FixedWindow::new(
        store.clone(),
        "ok",
        1_000_000,
        Duration::from_secs(365 * 86_400),
    )
    .unwrap();
    assert!(limit.check("x").await.is_ok());
    let gcra = Gcra::new(store, "ok", 1, Duration::from_secs(86_400), 1_000_000).unwrap();
    assert!(gcra.check("x").await.is_ok());
}
