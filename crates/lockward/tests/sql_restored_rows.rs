//! Fences never go back when a PostgreSQL or MySQL store brings back rows
//! older than the fences it granted (a standby promoted before it had the
//! last commits, a restore from last night's backup): the lock rows and
//! the fence sequence are set back to what they were three grants ago, as
//! such a server has them, and the next grant must still exceed every
//! fence granted before. SQLite: the file itself restored from a copy.

use lockward::{LockOptions, Store};
use lockward_testkit::{MariadbServer, PostgresServer};

/// Takes and releases `name` three times; the fences.
async fn three_grants(store: &Store, name: &str) -> Vec<u64> {
    let mut fences = Vec::new();
    for _ in 0..3 {
        let guard = store.try_acquire(name, &LockOptions::new()).await.unwrap();
        fences.push(guard.fence());
        guard.release().await.unwrap();
    }
    assert!(fences.windows(2).all(|w| w[1] > w[0]), "{fences:?}");
    fences
}

async fn next_fence(store: &Store, name: &str) -> u64 {
    let guard = store.try_acquire(name, &LockOptions::new()).await.unwrap();
    let fence = guard.fence();
    guard.release().await.unwrap();
    fence
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_lease_and_advisory_fences_pass_rows_brought_back_older() {
    let server = PostgresServer::start();
    for (url, table) in [
        (server.url(), "lockward_locks"),
        (
            format!("{}?mode=advisory", server.url()),
            "lockward_advisory",
        ),
    ] {
        let store = Store::open(&url).await.unwrap();
        let fences = three_grants(&store, "restored").await;
        // The row and the sequence as a server that lost the last three
        // grants has them.
        let older = fences[0] - 1;
        server.psql(&format!(
            "UPDATE {table} SET fence = {older} WHERE name = 'restored';
             SELECT setval('{table}_fence', greatest({older}, 1));"
        ));
        let after = next_fence(&store, "restored").await;
        assert!(
            after > fences[2],
            "{table}: fence {after} after a restore, while {} was granted",
            fences[2]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_lease_and_named_fences_pass_rows_brought_back_older() {
    let server = MariadbServer::start();
    for (url, table) in [
        (server.url(), "lockward_locks"),
        (format!("{}?mode=named", server.url()), "lockward_named"),
    ] {
        let store = Store::open(&url).await.unwrap();
        let fences = three_grants(&store, "restored").await;
        let older = fences[0] - 1;
        server.sql(&format!(
            "UPDATE lockward.{table} SET fence = {older} WHERE name = 'restored'"
        ));
        let after = next_fence(&store, "restored").await;
        assert!(
            after > fences[2],
            "{table}: fence {after} after a restore, while {} was granted",
            fences[2]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_fences_pass_a_file_restored_from_an_older_copy() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let copy = dir.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    let url = format!("sqlite://{}/locks.db", live.display());
    let store = Store::open(&url).await.unwrap();
    three_grants(&store, "restored").await;
    // A copy of the file as it is now (with its write-ahead log: nothing
    // writes while it is taken).
    for entry in std::fs::read_dir(&live).unwrap().flatten() {
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    let fences = three_grants(&store, "restored").await;
    drop(store);
    std::fs::remove_dir_all(&live).unwrap();
    std::fs::rename(&copy, &live).unwrap();
    let store = Store::open(&url).await.unwrap();
    let after = next_fence(&store, "restored").await;
    assert!(
        after > fences[2],
        "fence {after} after the restore, while {} was granted",
        fences[2]
    );
}

/// Three versions of record `key`, each written at the one before; the
/// versions.
async fn three_versions(store: &Store, key: &lockward::Name) -> [u64; 3] {
    let backend = store.backend();
    let ttl = std::time::Duration::from_secs(60);
    let v1 = backend
        .write_versioned(key, 0, "a", ttl)
        .await
        .unwrap()
        .unwrap();
    let v2 = backend
        .write_versioned(key, v1, "b", ttl)
        .await
        .unwrap()
        .unwrap();
    let v3 = backend
        .write_versioned(key, v2, "c", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(v1 < v2 && v2 < v3, "{v1} {v2} {v3}");
    [v1, v2, v3]
}

/// After the row was brought back to its first version, the next write
/// (at that version) must get a version above every one given out before,
/// so that a writer still holding a later one can never match.
async fn assert_versions_pass(store: &Store, key: &lockward::Name, versions: [u64; 3], what: &str) {
    let read = store.backend().read_versioned(key).await.unwrap().unwrap();
    assert_eq!(
        read.version, versions[0],
        "{what}: the row was not set back"
    );
    let ttl = std::time::Duration::from_secs(60);
    let next = store
        .backend()
        .write_versioned(key, versions[0], "d", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(
        next > versions[2],
        "{what}: version {next} after a restore, while {} was given out",
        versions[2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_pass_a_record_brought_back_older() {
    let key = lockward::Name::new("restored-record").unwrap();
    let pg = PostgresServer::start();
    let store = Store::open(&pg.url()).await.unwrap();
    let versions = three_versions(&store, &key).await;
    pg.psql(&format!(
        "UPDATE lockward_locks_versioned SET version = {}, value = 'a' WHERE key = '{key}'",
        versions[0]
    ));
    assert_versions_pass(&store, &key, versions, "postgres").await;

    let db = MariadbServer::start();
    let store = Store::open(&db.url()).await.unwrap();
    let versions = three_versions(&store, &key).await;
    db.sql(&format!(
        "UPDATE lockward.lockward_locks_versioned SET version = {}, record_value = 'a' WHERE record_key = '{key}'",
        versions[0]
    ));
    assert_versions_pass(&store, &key, versions, "mysql").await;

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/locks.db", dir.path().display());
    let store = Store::open(&url).await.unwrap();
    let versions = three_versions(&store, &key).await;
    // The row as it was after the first version, as a restored copy has it.
    let file = rusqlite::Connection::open(dir.path().join("locks.db")).unwrap();
    let changed = file
        .execute(
            "UPDATE lockward_versioned SET version = ?1, value = 'a' WHERE key = ?2",
            rusqlite::params![versions[0] as i64, key.as_str()],
        )
        .unwrap();
    assert_eq!(changed, 1, "the SQLite row was not set back");
    drop(file);
    assert_versions_pass(&store, &key, versions, "sqlite").await;
}
