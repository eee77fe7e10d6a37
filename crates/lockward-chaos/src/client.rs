//! One client process: loops acquire → read the register → hold → write
//! register + 1 → release until its run ends, recording every operation.

use std::path::Path;
use std::time::Duration;

use lockward::recipe::{Candidate, ElectionConfig};
use lockward::{LockOptions, Store};

use crate::history::{mono_at, mono_ns, outcome_of, Kind, Op, Outcome, Recorder};
use crate::served_client::ServedLease;
use crate::workload::{Workload, TTL};

/// Runs client `index` of `workload` until `until` (monotonic ns).
pub async fn run(
    url: &str,
    workload: Workload,
    index: u32,
    dir: &Path,
    until: u64,
) -> Result<(), String> {
    // Guarded clients lock through the `lockward` command, not here.
    if workload == Workload::Guarded {
        return crate::guarded_client::run(url, index, dir, until).await;
    }
    let store = loop {
        match Store::open(url).await {
            Ok(s) => break s,
            Err(_) if mono_ns() < until => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => return Err(e.to_string()),
        }
    };
    let wdir = dir.join(workload.name());
    std::fs::create_dir_all(&wdir).map_err(|e| e.to_string())?;
    let mut rec =
        Recorder::open(&wdir.join(format!("client-{index}.jsonl"))).map_err(|e| e.to_string())?;
    // These two write no register: they do not open the shared SQLite
    // file, which every other client opens at the same moment.
    if workload == Workload::Cron {
        return crate::cron_client::run(&store, index, dir, &mut rec, until).await;
    }
    if workload == Workload::Semaphore {
        return crate::sem_client::run(&store, index, dir, &mut rec, until).await;
    }
    // Every client opens the shared SQLite file at once: one may find it
    // busy (switching it to WAL) and tries again, as for the store.
    let register = loop {
        match workload.register(dir).await {
            Ok(r) => break r,
            Err(_) if mono_ns() < until => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => return Err(e.to_string()),
        }
    };
    if matches!(workload, Workload::RwWriter | Workload::RwReader) {
        let writer = workload == Workload::RwWriter;
        return crate::rw_client::run(
            &store,
            register.as_ref(),
            writer,
            index,
            dir,
            &mut rec,
            until,
        )
        .await;
    }
    let key = workload.key();
    // A served client's history is judged with the fenced clients': its
    // client numbers follow theirs.
    let index = if workload == Workload::Served {
        SERVED_INDEX + index
    } else {
        index
    };
    let daemon = if workload == Workload::Served {
        Some(crate::served_client::start_daemon(store.clone()).await?)
    } else {
        None
    };
    let candidate = Candidate::new(
        store.clone(),
        "chaos-election",
        format!("client-{index}"),
        ElectionConfig {
            lease_duration: TTL,
            renew_deadline: Duration::from_millis(700),
            retry_period: Duration::from_millis(200),
        },
    )
    .map_err(|e| e.to_string())?;
    let stop = dir.join("stop");
    while mono_ns() < until && !stop.exists() {
        let start = mono_ns();
        // Take the lock (or leadership): fence and local deadline.
        let held = if workload == Workload::Election {
            match tokio::time::timeout(Duration::from_secs(3), candidate.campaign()).await {
                Ok(Ok(l)) => Ok((l.epoch(), 0, Held::Leader(l))),
                Ok(Err(e)) => Err(outcome_of(&e)),
                Err(_) => Err(Outcome::Failed),
            }
        } else if let Some(daemon) = &daemon {
            let name = format!("chaos-{key}");
            match ServedLease::acquire(daemon, &name, TTL, Duration::from_secs(3)).await {
                Ok((fence, deadline, lease)) => Ok((fence, mono_at(deadline), Held::Served(lease))),
                Err(outcome) => Err(outcome),
            }
        } else {
            let opts = LockOptions::new().ttl(TTL).wait(Duration::from_secs(3));
            match store.acquire(&format!("chaos-{key}"), &opts).await {
                Ok(g) => Ok((g.fence(), mono_at(g.deadline()), Held::Lock(g))),
                Err(e) => Err(outcome_of(&e)),
            }
        };
        let (fence, deadline, held) = match held {
            Ok(h) => h,
            Err(outcome) => {
                rec.record(&Op {
                    client: index,
                    kind: Kind::Acquire,
                    outcome,
                    fence: 0,
                    start,
                    end: mono_ns(),
                    value: 0,
                    seen: 0,
                });
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        // Claim the register with our fence before reading it: an old
        // holder's write that lands later is refused, one that landed
        // earlier is in what we read.
        if let Err(e) = register.claim(key, fence).await {
            rec.record(&Op {
                client: index,
                kind: Kind::Acquire,
                outcome: outcome_of(&e),
                fence,
                start,
                end: mono_ns(),
                value: deadline,
                seen: 0,
            });
            held.release().await;
            continue;
        }
        rec.record(&Op {
            client: index,
            kind: Kind::Acquire,
            outcome: Outcome::Ok,
            fence,
            start,
            end: mono_ns(),
            value: deadline,
            seen: 0,
        });
        // Tell the harness who holds, so that a pause can hit a holder.
        let holding = dir.join(format!("holding-{}", std::process::id()));
        let _ = std::fs::write(&holding, "");
        // Read, hold, write read + 1: a naive client that trusts its lock.
        let current = match register.read(key).await {
            Ok(v) => v
                .and_then(|f| String::from_utf8(f.value).ok())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0),
            Err(_) => {
                let _ = std::fs::remove_file(&holding);
                held.release().await;
                continue;
            }
        };
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..150))).await;
        let start = mono_ns();
        let written = register
            .write(key, (current + 1).to_string().as_bytes(), fence)
            .await;
        let outcome = match &written {
            Ok(()) => Outcome::Ok,
            Err(e) => outcome_of(e),
        };
        rec.record(&Op {
            client: index,
            kind: Kind::Write,
            outcome,
            fence,
            start,
            end: mono_ns(),
            value: current + 1,
            seen: 0,
        });
        let _ = std::fs::remove_file(&holding);
        let start = mono_ns();
        let released = held.release().await;
        rec.record(&Op {
            client: index,
            kind: Kind::Release,
            outcome: if released {
                Outcome::Ok
            } else {
                Outcome::Failed
            },
            fence,
            start,
            end: mono_ns(),
            value: 0,
            seen: 0,
        });
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..20))).await;
    }
    Ok(())
}

/// Where served clients' numbers start in the fenced clients' history.
pub const SERVED_INDEX: u32 = 100;

/// A held lock or leadership.
enum Held {
    Lock(lockward::Guard),
    Leader(lockward::recipe::Leadership),
    Served(ServedLease),
}

impl Held {
    async fn release(self) -> bool {
        match self {
            Held::Lock(g) => g.release().await.is_ok(),
            Held::Leader(l) => l.resign().await.is_ok(),
            Held::Served(l) => l.release().await,
        }
    }
}
