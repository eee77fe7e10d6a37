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
    let mut fences = Vec::new();
    for name in [
        "chaos-fenced",
        "chaos-mutant",
        "chaos-unfenced",
        "chaos-election",
        // The read-write lock's writer (or a reader passing through it).
        "chaos-rw",
    ] {
        match store.inspect(name).await {
            Ok(Some(holder)) => {
                if name == "chaos-rw" {
                    fences.extend(holder.fence.map(|fence| EndedHold { lock: name, fence }));
                }
                ended.push(end(&store, name, &holder).await);
            }
            Ok(None) => {}
            Err(e) => ended.push(format!("{name}: {e}")),
        }
    }
    match store.list("chaos-sem#permit/").await {
        Ok(rows) if !rows.is_empty() => {
            let row = &rows[fastrand::usize(..rows.len())];
            fences.extend(row.fence.map(|fence| EndedHold {
                lock: "chaos-sem",
                fence,
            }));
            ended.push(end(&store, &row.name, row).await);
        }
        Ok(_) => {}
        Err(e) => ended.push(format!("chaos-sem: {e}")),
    }
    (format!("forced unlock: {}", ended.join("; ")), fences)
}

/// Ends `holder` of `name`; says how it went. Its fence, recorded before,
/// counts as ended even when refused: an answer lost with its connection
/// may hide an unlock that took effect.
async fn end(store: &lockward::Store, name: &str, holder: &lockward::LockInfo) -> String {
    match store.force_unlock(name, holder).await {
        Ok(_) => format!("{name} (fence {:?}) ended", holder.fence),
        Err(e) => format!("{name}: {e}"),
    }
}
