//! Many locks held at once: how fast they are taken, what each costs the
//! server, and how fast a fresh name cycles while they are all held.

use std::time::{Duration, Instant};

use lockward::{Result, Store, StoreUrl};

use super::{bare_lock_bytes, cycles, joined, server_memory, Latencies};

/// What holding `locks` locks on distinct names cost.
#[derive(Debug, Clone)]
pub struct Scale {
    /// Locks held at the same time (fewer than asked when the store
    /// refused more: see `stopped`).
    pub locks: usize,
    /// How fast they were taken, all clients together.
    pub acquisitions_per_s: f64,
    /// Server bytes per held lock, and what was read (`ServerMemory::what`).
    pub bytes_per_lock: Option<(f64, &'static str)>,
    /// Redis only: server bytes per bare `SET NX PX` key, measured in the
    /// same run, to compare `bytes_per_lock` with.
    pub bare_key_bytes: Option<f64>,
    /// Uncontended cycles on a fresh name while they were held.
    pub cycles_while_held: Latencies,
    /// Why fewer locks than asked were taken.
    pub stopped: Option<String>,
}

/// Takes `n` locks on distinct names under `prefix` with `clients` handles
/// from `open()`, measures, then releases them all.
pub async fn scale<F, Fut>(
    open: F,
    url: &StoreUrl,
    prefix: &str,
    n: usize,
    clients: usize,
    run_for: Duration,
) -> Result<Scale>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Store>>,
{
    let bare_key_bytes = bare_lock_bytes(url, prefix, n).await;
    let clients = clients.clamp(1, n.max(1));
    // Every connection is open before the first reading, so the growth is
    // the locks' alone.
    let mut stores = Vec::with_capacity(clients + 1);
    for _ in 0..=clients {
        stores.push(open().await?);
    }
    let fresh = stores.pop().expect("clients + 1 stores");
    let before = server_memory(url).await;
    // Long enough to outlast the measurement (where the store allows it);
    // released at the end anyway.
    let opts = super::options(&fresh, Duration::from_secs(900));
    let began = Instant::now();
    let mut tasks = Vec::new();
    for (c, store) in stores.into_iter().enumerate() {
        let (opts, prefix) = (opts.clone(), prefix.to_string());
        let share = n / clients + usize::from(c < n % clients);
        tasks.push(tokio::spawn(async move {
            let mut held = Vec::with_capacity(share);
            for i in 0..share {
                match store
                    .try_acquire(format!("{prefix}/held/{c}/{i}"), &opts)
                    .await
                {
                    Ok(g) => held.push(g),
                    Err(e) => return (held, Some(e.to_string())),
                }
            }
            (held, None)
        }));
    }
    let mut held = Vec::new();
    let mut stopped = None;
    for t in tasks {
        let (guards, error) = t.await.map_err(joined)?;
        held.push(guards);
        stopped = stopped.or(error);
    }
    let took = began.elapsed();
    if took >= opts.get_ttl() {
        stopped = stopped.or(Some(format!(
            "taking them took {took:?}, longer than their TTL {:?}: the first ones may have expired",
            opts.get_ttl()
        )));
    }
    let locks: usize = held.iter().map(Vec::len).sum();
    let after = server_memory(url).await;
    let bytes_per_lock = match (before, after) {
        (Some(b), Some(a)) if locks > 0 => Some((
            a.bytes.saturating_sub(b.bytes) as f64 / locks as f64,
            a.what,
        )),
        _ => None,
    };
    let cycles_while_held = match cycles(&fresh, &format!("{prefix}/fresh"), run_for).await {
        Ok(c) => c,
        Err(e) => {
            stopped = stopped.or(Some(format!("cycling while they are held: {e}")));
            Latencies::new()
        }
    };
    // Release everything before reporting an error, so nothing is left.
    let releases: Vec<_> = held
        .into_iter()
        .map(|guards| {
            tokio::spawn(async move {
                for g in guards {
                    let _ = g.release().await;
                }
            })
        })
        .collect();
    for r in releases {
        let _ = r.await;
    }
    Ok(Scale {
        locks,
        acquisitions_per_s: locks as f64 / took.as_secs_f64().max(1e-9),
        bytes_per_lock,
        bare_key_bytes,
        cycles_while_held,
        stopped,
    })
}
