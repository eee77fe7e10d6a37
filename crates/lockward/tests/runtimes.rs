//! A store outlives the runtime it was first used on: renewal starts again
//! on the next runtime.

use std::time::Duration;

use lockward::{LockOptions, Store};

#[test]
fn renewal_survives_a_runtime_shutdown() {
    let store = Store::memory();
    let opts = LockOptions::new().ttl(Duration::from_millis(150));
    let first = tokio::runtime::Runtime::new().unwrap();
    first.block_on(async {
        let g = store.try_acquire("a", &opts).await.unwrap();
        g.release().await.unwrap();
    });
    drop(first);
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let g = store.try_acquire("b", &opts).await.unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(!g.is_lost(), "renewal did not run on the second runtime");
        g.release().await.unwrap();
    });
}
