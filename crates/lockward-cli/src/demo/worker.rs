//! What one demo process does: `lockward demo-worker ROLE DIR RUN`.
//!
//! Each role acts on shared state the way a naive service would, with or
//! without lockward's protection; the demo counts what they did from the
//! files they leave in DIR and from the store.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lockward::fence::{FencedResource, SqliteRegister};
use lockward::recipe::cron::{CronJob, CronOptions, Outcome};
use lockward::recipe::{Idempotency, Optimistic, RwLock};
use lockward::{LockOptions, Store};

/// Appends one line in one write, so concurrent processes never mix lines.
pub fn append(path: &Path, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

fn read_number(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

async fn wait_for(path: &Path) {
    while !path.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How long the price report's writer and readers run.
const PRICES_FOR: Duration = Duration::from_millis(1_500);

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn lock_opts() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(10))
        .wait(Duration::from_secs(30))
}

/// The account the paused-holder scenario writes, fenced.
pub async fn register(dir: &Path) -> lockward::Result<SqliteRegister> {
    SqliteRegister::open(&dir.join("resources.db"), "accounts").await
}

/// Runs `role` on `store` (opened from `url`, which the database variant
/// connects to directly).
pub async fn work(
    store: &Store,
    #[cfg_attr(
        not(any(feature = "postgres", feature = "mysql")),
        allow(unused_variables)
    )]
    url: &str,
    role: &str,
    dir: &Path,
    run: &str,
) -> Result<(), String> {
    let at = |file: &str| -> PathBuf { dir.join(file) };
    let name = |what: &str| format!("demo/{run}/{what}");
    let e = |e: lockward::Error| e.to_string();
    match role {
        // Payment: charge the order unless it is marked paid.
        "payment-none" => charge_unless_paid(dir, "none").await,
        "payment-lock" => {
            let guard = store
                .acquire(name("order-1"), &lock_opts())
                .await
                .map_err(e)?;
            charge_unless_paid(dir, "lock").await;
            guard.release().await.map_err(e)?;
        }
        "payment-idempotency" => {
            let keys = Idempotency::new(store.clone());
            keys.run(&name("order-1"), || async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                append(&at("charges-idempotency"), "charged");
                Ok::<_, String>("charged".to_string())
            })
            .await
            .map_err(|e| e.to_string())?;
        }
        // Inventory: five buyers per process.
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        "stock-for-update" => {
            let db = super::for_update::server(url).ok_or("the store is not a plain database")?;
            let buyers: Vec<_> = (0..5)
                .map(|_| {
                    let (db, run, sales) = (db.clone(), run.to_string(), at("sales-for-update"));
                    tokio::spawn(async move {
                        if super::for_update::buy(&db, &run).await? {
                            append(&sales, "sold");
                        }
                        Ok::<_, String>(())
                    })
                })
                .collect();
            for b in buyers {
                b.await.map_err(|e| e.to_string())??;
            }
        }
        "stock-none" | "stock-lock" | "stock-optimistic" => {
            let variant = role.trim_start_matches("stock-");
            let buyers: Vec<_> = (0..5)
                .map(|_| {
                    let (store, dir, key) = (store.clone(), dir.to_path_buf(), name("stock"));
                    let variant = variant.to_string();
                    tokio::spawn(async move { buy(&store, &dir, &key, &variant).await })
                })
                .collect();
            for b in buyers {
                b.await.map_err(|e| e.to_string())??;
            }
        }
        // Cron: three seconds of a per-second job.
        "cron-none" | "cron-lock" => {
            let job = CronJob::new(
                store.clone(),
                &format!("demo-{run}"),
                "* * * * * *",
                "UTC",
                &std::process::id().to_string(),
                CronOptions::default(),
            )
            .map_err(e)?;
            let until = chrono::Utc::now() + chrono::Duration::seconds(3);
            let mut fire = job.next_fire_after(chrono::Utc::now()).map_err(e)?;
            while fire < until {
                let wait = (fire - chrono::Utc::now()).to_std().unwrap_or_default();
                tokio::time::sleep(wait).await;
                let line = fire.timestamp().to_string();
                if role == "cron-none" {
                    append(&at("cron-none"), &line);
                } else if let Some(claim) = job.claim(fire).await.map_err(e)? {
                    append(&at("cron-lock"), &line);
                    claim.finish(Outcome::Succeeded).await.map_err(e)?;
                }
                fire = job.next_fire_after(fire).map_err(e)?;
            }
        }
        // Migration: run it unless it ran.
        "migrate-none" => {
            tokio::time::sleep(Duration::from_millis(100)).await;
            append(&at("migrate-none"), "ran");
        }
        "migrate-once" => {
            let once = Idempotency::new(store.clone())
                .namespace("demo-once")
                .retention(Duration::from_secs(3600))
                .lock_options(lock_opts())
                .waiting(true);
            let migrate = || async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                append(&at("migrate-once"), "ran");
                Ok::<_, String>(format!("ran by {}", std::process::id()))
            };
            once.run(&name("migration"), migrate)
                .await
                .map_err(|err| err.to_string())?;
        }
        // Paused holder: take the lock, wait to be resumed, write anyway.
        "holder-fenced" | "holder-unfenced" => {
            let opts = LockOptions::new().ttl(Duration::from_millis(500));
            let guard = store.acquire(name(role), &opts).await.map_err(e)?;
            std::fs::write(at("ready"), guard.fence().to_string()).map_err(|e| e.to_string())?;
            wait_for(&at("go")).await;
            write_account(dir, role == "holder-fenced", "A", guard.fence()).await?;
        }
        // The same, with the account a row of a table the database guards.
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        "holder-db-guarded" => {
            let db = guarded_database(url)?;
            let opts = LockOptions::new().ttl(Duration::from_millis(500));
            let guard = store.acquire(name(role), &opts).await.map_err(e)?;
            super::db_guard::claim(url, &name(role), guard.fence()).await?;
            std::fs::write(at("ready"), guard.fence().to_string()).map_err(|e| e.to_string())?;
            wait_for(&at("go")).await;
            if !super::db_guard::write(&db, run, &name(role), guard.fence(), "A").await? {
                append(&at("refused"), "A");
            }
        }
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        "taker-db-guarded" => {
            let db = guarded_database(url)?;
            let holder = name("holder-db-guarded");
            let opts = lock_opts().wait(Duration::from_secs(3));
            let guard = match store.acquire(&holder, &opts).await {
                Ok(guard) => guard,
                Err(lockward::Error::TimedOut { .. }) => return Ok(()),
                Err(other) => return Err(e(other)),
            };
            append(&at("taken"), &guard.fence().to_string());
            super::db_guard::claim(url, &holder, guard.fence()).await?;
            if !super::db_guard::write(&db, run, &holder, guard.fence(), "B").await? {
                append(&at("refused"), "B");
            }
            guard.release().await.map_err(e)?;
        }
        "taker-fenced" | "taker-unfenced" => {
            let holder = role.replace("taker", "holder");
            let opts = lock_opts().wait(Duration::from_secs(3));
            let guard = match store.acquire(name(&holder), &opts).await {
                Ok(guard) => guard,
                // A session lock (PostgreSQL advisory, MySQL named) stays with the
                // paused holder: nobody else can take it meanwhile.
                Err(lockward::Error::TimedOut { .. }) => return Ok(()),
                Err(other) => return Err(e(other)),
            };
            append(&at("taken"), &guard.fence().to_string());
            write_account(dir, role == "taker-fenced", "B", guard.fence()).await?;
            guard.release().await.map_err(e)?;
        }
        // Price report: a writer updates two prices that must match; readers
        // read both and count torn reads.
        "prices-writer-none" | "prices-writer-rwlock" => {
            let lock = RwLock::new(store.clone(), name("prices")).map_err(e)?;
            let until = std::time::Instant::now() + PRICES_FOR;
            let mut version = 0u64;
            while std::time::Instant::now() < until {
                version += 1;
                let writer = match role.ends_with("rwlock") {
                    true => Some(lock.write(&lock_opts()).await.map_err(e)?),
                    false => None,
                };
                let _ = std::fs::write(at("price-low"), version.to_string());
                tokio::time::sleep(Duration::from_millis(3)).await;
                let _ = std::fs::write(at("price-high"), version.to_string());
                append(&at(&format!("{role}-writes")), "w");
                if let Some(w) = writer {
                    w.release().await.map_err(e)?;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        "prices-reader-none" | "prices-reader-rwlock" => {
            let lock = RwLock::new(store.clone(), name("prices")).map_err(e)?;
            let until = std::time::Instant::now() + PRICES_FOR;
            let events = at(&format!("{role}-events"));
            while std::time::Instant::now() < until {
                let reader = match role.ends_with("rwlock") {
                    true => Some(lock.read(&lock_opts()).await.map_err(e)?),
                    false => None,
                };
                append(&events, &format!("in {}", now_nanos()));
                let low = read_number(&at("price-low"));
                tokio::time::sleep(Duration::from_millis(20)).await;
                let high = read_number(&at("price-high"));
                let torn = if low == high { "whole" } else { "torn" };
                append(&events, &format!("out {} {torn}", now_nanos()));
                if let Some(r) = reader {
                    r.release().await.map_err(e)?;
                }
            }
        }
        other => return Err(format!("unknown demo role {other:?}")),
    }
    Ok(())
}

/// The naive check-then-act: read "paid?", call the bank, charge, mark.
async fn charge_unless_paid(dir: &Path, variant: &str) {
    let paid = dir.join(format!("paid-{variant}"));
    if paid.exists() {
        return;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    append(&dir.join(format!("charges-{variant}")), "charged");
    let _ = std::fs::write(&paid, "yes");
}

/// One buyer: take an item if any is left.
async fn buy(store: &Store, dir: &Path, key: &str, variant: &str) -> Result<(), String> {
    let stock = dir.join(format!("stock-{variant}"));
    let sales = dir.join(format!("sales-{variant}"));
    match variant {
        "none" => {
            let left = read_number(&stock);
            if left > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let _ = std::fs::write(&stock, (left - 1).to_string());
                append(&sales, "sold");
            }
        }
        "lock" => {
            let guard = store
                .acquire(key, &lock_opts())
                .await
                .map_err(|e| e.to_string())?;
            let left = read_number(&stock);
            if left > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let _ = std::fs::write(&stock, (left - 1).to_string());
                append(&sales, "sold");
            }
            guard.release().await.map_err(|e| e.to_string())?;
        }
        _ => {
            let items = Optimistic::new(store.clone()).tries(100);
            match items
                .update(key, |v| {
                    let left: u64 = v.and_then(|v| v.parse().ok()).unwrap_or(0);
                    if left == 0 {
                        return Err("sold out");
                    }
                    Ok((left - 1).to_string())
                })
                .await
            {
                Ok(done) => {
                    append(&sales, "sold");
                    append(&dir.join("retries-optimistic"), &done.conflicts.to_string());
                }
                Err(lockward::recipe::UpdateError::Declined(_)) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    Ok(())
}

/// Writes the account: through the fenced register, or straight to a file.
async fn write_account(dir: &Path, fenced: bool, value: &str, fence: u64) -> Result<(), String> {
    if !fenced {
        return std::fs::write(dir.join("account"), value).map_err(|e| e.to_string());
    }
    let account = register(dir).await.map_err(|e| e.to_string())?;
    match account.write("account", value.as_bytes(), fence).await {
        Ok(()) => Ok(()),
        Err(lockward::Error::Stale { .. }) => {
            append(&dir.join("refused"), value);
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The database server of the store, for the guarded variant.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn guarded_database(url: &str) -> Result<super::for_update::Database, String> {
    super::for_update::server(url)
        .ok_or_else(|| "the guarded variant needs a PostgreSQL or MySQL store".to_string())
}
