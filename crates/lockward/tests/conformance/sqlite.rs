use lockward::{Error, Store};
use tempfile::TempDir;

use crate::suite::Fixture;

struct Sqlite {
    dir: TempDir,
}

#[async_trait::async_trait]
impl Fixture for Sqlite {
    async fn store(&self) -> Store {
        // A new connection each time, as another process would open it.
        Store::open(&self.url()).await.expect("open sqlite store")
    }
    fn url(&self) -> String {
        format!("sqlite://{}", self.dir.path().join("locks.db").display())
    }
}

async fn fixture() -> Sqlite {
    Sqlite {
        dir: tempfile::tempdir().expect("temp dir"),
    }
}

/// The suite on this backend.
pub fn register(trials: &mut Vec<libtest_mimic::Trial>) {
    crate::suite::register(
        trials,
        "sqlite",
        lockward::backend::sqlite::CAPABILITIES,
        fixture,
    );
    crate::suite::own(
        trials,
        "sqlite::unwritable_path_is_unavailable",
        unwritable_path_is_unavailable,
    );
    crate::suite::own(
        trials,
        "sqlite::default_path_is_created",
        default_path_is_created,
    );
}

/// A store whose file cannot be created is unavailable, says where and
/// why, and keeps the driver's error as its source.
async fn unwritable_path_is_unavailable() {
    // A path below a regular file can never be created, even by root.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"not a folder").unwrap();
    let url = format!("sqlite://{}", file.join("locks.db").display());
    match Store::open(&url).await {
        Err(Error::Unavailable {
            address, message, ..
        }) => {
            assert!(address.contains("plain-file"), "{address}");
            assert!(message.contains("folder"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// The folders of a store's path are created.
async fn default_path_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("a/b/locks.db").display());
    let store = Store::open(&url).await.unwrap();
    let guard = store.try_acquire("x", &Default::default()).await.unwrap();
    assert!(dir.path().join("a/b/locks.db").exists());
    guard.release().await.unwrap();
}
