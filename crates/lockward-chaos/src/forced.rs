//! The operator's forced unlocks (`lockward unlock --force`) as a fault:
//! which holders they end, and the holds the read-write and semaphore
//! checks must end with them.

use serde::Serialize;

/// A hold of the semaphore or read-write lock a forced unlock ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndedHold {
    /// The workload's lock: `chaos-sem` or `chaos-rw`.
    pub lock: &'static str,
    /// The fence the holder's row showed.
    pub fence: u64,
}

/// Ends the current holders of the fenced (or mutant), control,
/// election and read-write locks and one semaphore holder (by its row
/// in `status`), as an operator would with `lockward unlock --force`;
/// says whom, and the fences of the read-write and semaphore holds,
/// which their checks end here (they count the overlaps a forced
/// unlock causes by design). The cron lock is left alone: its check
/// has no such cut.
pub async fn force_unlock(url: &str) -> (String, Vec<EndedHold>) {
    let store = match lockward::Store::open(url).await {
        Ok(store) => store,
        Err(e) => return (format!("cannot open the store: {e}"), Vec::new()),
    };
    let mut ended = Vec::new();
    for name in [
        "chaos-fenced",
        "chaos-mutant",
        "chaos-unfenced",
        "chaos-election",
    ] {
        let done = match store.inspect(name).await {
            Ok(Some(holder)) => store
                .force_unlock(name, &holder)
                .await
                .map(|_| format!("{name} (fence {:?}) ended", holder.fence)),
            Ok(None) => continue,
            Err(e) => Err(e),
        };
        ended.push(done.unwrap_or_else(|e| format!("{name}: {e}")));
    }
    let mut fences = Vec::new();
    // The read-write lock's writer (or a reader passing through it).
    // Counted as ended even when refused: an answer lost with its
    // connection may hide an unlock that took effect.
    match store.inspect("chaos-rw").await {
        Ok(Some(holder)) => {
            fences.extend(holder.fence.map(|fence| EndedHold {
                lock: "chaos-rw",
                fence,
            }));
            let done = store.force_unlock("chaos-rw", &holder).await;
            ended.push(match done {
                Ok(_) => format!("chaos-rw (fence {:?}) ended", holder.fence),
                Err(e) => format!("chaos-rw: {e}"),
            });
        }
        Ok(None) => {}
        Err(e) => ended.push(format!("chaos-rw: {e}")),
    }
    match store.list("chaos-sem#permit/").await {
        Ok(rows) if !rows.is_empty() => {
            let row = &rows[fastrand::usize(..rows.len())];
            fences.extend(row.fence.map(|fence| EndedHold {
                lock: "chaos-sem",
                fence,
            }));
            let done = store.force_unlock(&row.name, row).await;
            ended.push(match done {
                Ok(_) => format!("{} (fence {:?}) ended", row.name, row.fence),
                Err(e) => format!("{}: {e}", row.name),
            });
        }
        Ok(_) => {}
        Err(e) => ended.push(format!("chaos-sem: {e}")),
    }
    (format!("forced unlock: {}", ended.join("; ")), fences)
}
