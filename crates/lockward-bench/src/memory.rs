//! What the store's server holds, in bytes, through the store's own side
//! client, so a benchmark can divide the growth by the locks it took.
//! Embedded stores report nothing.

use lockward::backend::side;
use lockward::StoreUrl;

pub use lockward::backend::side::ServerBytes as ServerMemory;

/// Reads the server's size now, or `None` for an embedded store or when
/// the server does not say (a ZooKeeper without `mntr` allowed).
pub async fn server_memory(url: &StoreUrl) -> Option<ServerMemory> {
    let mut client = side::connect(url).await.ok()??;
    client.server_bytes().await.ok()?
}

/// Server bytes per key of the store's plain lock (Redis: a bare `SET key
/// token NX PX` key), measured by writing `n` of them under `prefix` and
/// deleting them again; `None` where there is no plain lock to compare.
pub async fn bare_lock_bytes(url: &StoreUrl, prefix: &str, n: usize) -> Option<f64> {
    let mut client = side::connect(url).await.ok()??;
    client.bare_lock_bytes(prefix, n).await.ok()?
}
