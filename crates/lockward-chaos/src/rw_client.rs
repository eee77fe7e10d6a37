//! The read-write workload's clients: writers set two fenced registers to
//! their fence, one after the other, under the write side of a read-write
//! lock; readers read both under the read side. A reader that finds them
//! different saw a half-done write (see [`crate::rw_check`]).

use std::path::Path;
use std::time::Duration;

use lockward::fence::FencedResource;
use lockward::recipe::RwLock;
use lockward::{LockOptions, Store};

use crate::history::{mono_at, mono_ns, outcome_of, Kind, Op, Outcome, Recorder};
use crate::workload::TTL;

/// The two registers a writer sets.
pub const KEYS: [&str; 2] = ["rw-a", "rw-b"];

/// Runs one writer (`writer`) or reader until `until` or the stop file.
pub async fn run(
    store: &Store,
    register: &dyn FencedResource,
    writer: bool,
    index: u32,
    dir: &Path,
    rec: &mut Recorder,
    until: u64,
) -> Result<(), String> {
    let lock = RwLock::new(store.clone(), "chaos-rw").map_err(|e| e.to_string())?;
    let stop = dir.join("stop");
    let holding = dir.join(format!("holding-{}", std::process::id()));
    let op = |kind, outcome, fence, start, value, seen| Op {
        client: index,
        kind,
        outcome,
        fence,
        start,
        end: mono_ns(),
        value,
        seen,
    };
    while mono_ns() < until && !stop.exists() {
        let start = mono_ns();
        let opts = LockOptions::new().ttl(TTL).wait(Duration::from_secs(3));
        let held = if writer {
            lock.write(&opts)
                .await
                .map(|g| (g.fence(), g.deadline(), Held::Writer(g)))
        } else {
            lock.read(&opts)
                .await
                .map(|r| (r.fence(), r.deadline(), Held::Reader(Box::new(r))))
        };
        let (fence, deadline, held) = match held {
            Ok(h) => h,
            Err(e) => {
                rec.record(&op(Kind::Acquire, outcome_of(&e), 0, start, 0, 0));
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        rec.record(&op(
            Kind::Acquire,
            Outcome::Ok,
            fence,
            start,
            mono_at(deadline),
            0,
        ));
        let _ = std::fs::write(&holding, "");
        if writer {
            write_both(register, fence, index, rec).await;
        } else {
            let start = mono_ns();
            let a = read(register, KEYS[0]).await;
            tokio::time::sleep(Duration::from_millis(fastrand::u64(0..30))).await;
            let b = read(register, KEYS[1]).await;
            let (outcome, a, b) = match (a, b) {
                (Some(a), Some(b)) => (Outcome::Ok, a, b),
                _ => (Outcome::Failed, 0, 0),
            };
            rec.record(&op(Kind::Read, outcome, fence, start, a, b));
        }
        let _ = std::fs::remove_file(&holding);
        let start = mono_ns();
        let released = held.release().await;
        let outcome = if released {
            Outcome::Ok
        } else {
            Outcome::Failed
        };
        rec.record(&op(Kind::Release, outcome, fence, start, 0, 0));
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..20))).await;
    }
    Ok(())
}

/// Claims both registers with `fence` (an older writer's late write is
/// then refused), then sets each to `fence`, with a pause between.
async fn write_both(register: &dyn FencedResource, fence: u64, index: u32, rec: &mut Recorder) {
    for key in KEYS {
        if register.claim(key, fence).await.is_err() {
            return;
        }
    }
    for (i, key) in KEYS.iter().enumerate() {
        if i == 1 {
            tokio::time::sleep(Duration::from_millis(fastrand::u64(0..100))).await;
        }
        let start = mono_ns();
        let written = register
            .write(key, fence.to_string().as_bytes(), fence)
            .await;
        rec.record(&Op {
            client: index,
            kind: Kind::Write,
            outcome: match &written {
                Ok(()) => Outcome::Ok,
                Err(e) => outcome_of(e),
            },
            fence,
            start,
            end: mono_ns(),
            value: fence,
            seen: 0,
        });
        if written.is_err() {
            return;
        }
    }
}

/// The value of `key`, 0 when never written; `None` when it cannot be read.
async fn read(register: &dyn FencedResource, key: &str) -> Option<u64> {
    match register.read(key).await {
        Ok(v) => Some(
            v.and_then(|f| String::from_utf8(f.value).ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        ),
        Err(_) => None,
    }
}

/// A held side of the read-write lock.
enum Held {
    Writer(lockward::Guard),
    Reader(Box<lockward::recipe::ReadGuard>),
}

impl Held {
    async fn release(self) -> bool {
        match self {
            Held::Writer(g) => g.release().await.is_ok(),
            Held::Reader(r) => r.release().await.is_ok(),
        }
    }
}
