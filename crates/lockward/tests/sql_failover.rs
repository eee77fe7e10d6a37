//! Fences never go back when a PostgreSQL standby or a MariaDB replica
//! that fell behind is promoted after its primary died: the grants it
//! never received are lost with the primary, and the next grant on the
//! promoted server must still exceed every fence granted before (the
//! rule `max(stored + 1, the server's clock in µs)`, docs/fences.md).

use lockward::recipe::Semaphore;
use lockward::{LockOptions, Store};
use lockward_testkit::{MariadbServer, PostgresServer};

const NAME: &str = "failover";

/// Takes and releases [`NAME`] `n` times on `url`; the last fence.
async fn grants(url: &str, n: usize) -> u64 {
    let store = Store::open(url).await.unwrap();
    let mut last = 0;
    for _ in 0..n {
        let guard = store.try_acquire(NAME, &LockOptions::new()).await.unwrap();
        assert!(guard.fence() > last, "{} after {last}", guard.fence());
        last = guard.fence();
        guard.release().await.unwrap();
    }
    last
}

/// Takes and gives back a permit of the semaphore [`NAME`] `n` times on
/// `url`; the last fence.
async fn permit_grants(url: &str, n: usize) -> u64 {
    let semaphore = Semaphore::new(Store::open(url).await.unwrap(), NAME, 2).unwrap();
    let mut last = 0;
    for _ in 0..n {
        let permit = semaphore.try_acquire(&LockOptions::new()).await.unwrap();
        let fence = permit.guard().fence();
        assert!(fence > last, "{fence} after {last}");
        last = fence;
        permit.release().await.unwrap();
    }
    last
}

/// Checks that the promoted server is behind: what `query` reads of the
/// fence's state there (`after`) is below what it read on the primary
/// just before it died (`before`), so the test shows the rule at work
/// and not a replica that had caught up.
fn assert_lost(before: &str, after: &str, query: &str) {
    let parse = |v: &str| -> u64 { v.parse().unwrap_or_else(|_| panic!("{query}: {v:?}")) };
    assert!(
        parse(after) < parse(before),
        "{query}: {after} on the promoted server, not behind the primary's {before}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_postgres_standby_passes_every_fence_its_primary_granted() {
    let mut primary = PostgresServer::start();
    let standby = PostgresServer::start_standby(&primary);
    // Each mode, and a query of where its fences come from: the lock's row
    // (lease mode), the table's sequence (advisory mode: the row lives
    // only while the lock is held; semaphores' permits).
    let modes = [
        (
            "",
            "SELECT fence FROM lockward_locks WHERE name = 'failover'",
        ),
        (
            "?mode=advisory",
            "SELECT last_value FROM lockward_advisory_fence",
        ),
    ];
    let permits = "SELECT last_value FROM lockward_locks_fence";
    // The doctor sees the standby, from both sides.
    let report = lockward::doctor::diagnose(&primary.url().parse().unwrap()).await;
    let seen = report.iter().find(|f| f.check == "standbys");
    assert!(
        seen.is_some_and(|f| f.detail.starts_with("1 standbys, asynchronous")
            && f.detail.contains("fences still grow")),
        "{report:?}"
    );
    let report = lockward::doctor::diagnose(&standby.url().parse().unwrap()).await;
    assert!(
        report[0].level == lockward::doctor::Level::Error
            && report[0].detail.contains("read-only (a standby?)"),
        "{report:?}"
    );
    for (mode, _) in modes {
        grants(&format!("{}{mode}", primary.url()), 3).await;
    }
    permit_grants(&primary.url(), 3).await;
    primary.await_standbys_caught_up();
    // The standby stops receiving; the primary grants more than one WAL
    // record of a sequence covers (32 values).
    primary.pause_wal_senders();
    let mut granted = Vec::new();
    for (mode, _) in modes {
        granted.push(grants(&format!("{}{mode}", primary.url()), 40).await);
    }
    let permit_granted = permit_grants(&primary.url(), 40).await;
    let before: Vec<String> = modes.iter().map(|(_, query)| primary.psql(query)).collect();
    let permits_before = primary.psql(permits);
    primary.kill9();
    standby.promote();
    for (((mode, query), granted), before) in modes.into_iter().zip(granted).zip(before) {
        assert_lost(&before, &standby.psql(query), query);
        let after = grants(&format!("{}{mode}", standby.url()), 1).await;
        assert!(
            after > granted,
            "{mode}: fence {after} on the promoted standby, while {granted} was granted"
        );
    }
    assert_lost(&permits_before, &standby.psql(permits), permits);
    let after = permit_grants(&standby.url(), 1).await;
    assert!(
        after > permit_granted,
        "a permit's fence {after} on the promoted standby, while {permit_granted} was granted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_mariadb_replica_passes_every_fence_its_primary_granted() {
    let mut primary = MariadbServer::start_primary();
    let replica = MariadbServer::start_replica_of(&primary);
    let modes = [
        (
            "",
            "SELECT fence FROM lockward.lockward_locks WHERE name = 'failover'",
        ),
        (
            "?mode=named",
            "SELECT fence FROM lockward.lockward_named WHERE name = 'failover'",
        ),
    ];
    for (mode, _) in modes {
        grants(&format!("{}{mode}", primary.url()), 3).await;
    }
    replica.await_caught_up_with(&primary);
    replica.stop_replicating();
    let mut granted = Vec::new();
    for (mode, _) in modes {
        granted.push(grants(&format!("{}{mode}", primary.url()), 10).await);
    }
    let before: Vec<String> = modes.iter().map(|(_, query)| primary.sql(query)).collect();
    primary.kill9();
    replica.promote();
    for (((mode, query), granted), before) in modes.into_iter().zip(granted).zip(before) {
        assert_lost(&before, &replica.sql(query), query);
        let after = grants(&format!("{}{mode}", replica.url()), 1).await;
        assert!(
            after > granted,
            "{mode}: fence {after} on the promoted replica, while {granted} was granted"
        );
    }
}
