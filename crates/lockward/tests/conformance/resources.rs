//! Every fenced resource this build has, for the paused-holder check.

use std::sync::Arc;

use lockward::fence::{FencedResource, MemoryRegister};

/// (label, resource) for each resource kind of this build.
pub async fn all() -> Vec<(&'static str, Arc<dyn FencedResource>)> {
    let mut all: Vec<(&'static str, Arc<dyn FencedResource>)> =
        vec![("memory", Arc::new(MemoryRegister::new()))];
    #[cfg(feature = "sqlite")]
    {
        static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
        let dir = DIR.get_or_init(|| lockward_testkit::data_dir("resources"));
        let r =
            lockward::fence::SqliteRegister::open(&dir.path().join("resources.db"), "resources")
                .await
                .unwrap();
        all.push(("sqlite", Arc::new(r)));
    }
    #[cfg(feature = "redis")]
    {
        let url = crate::redis::server().url();
        all.push((
            "redis",
            Arc::new(
                lockward::fence::RedisRegister::connect(&url, "res:")
                    .await
                    .unwrap(),
            ),
        ));
    }
    #[cfg(feature = "postgres")]
    {
        let url = crate::postgres::server().url();
        all.push((
            "postgres",
            Arc::new(
                lockward::fence::PostgresRegister::connect(&url, "resources")
                    .await
                    .unwrap(),
            ),
        ));
    }
    #[cfg(feature = "mysql")]
    {
        let url = crate::mysql::server().url();
        all.push((
            "mysql",
            Arc::new(
                lockward::fence::MysqlRegister::connect(&url, "resources")
                    .await
                    .unwrap(),
            ),
        ));
    }
    all
}
