//! What `status` shows at one moment: held locks, elections with their
//! leader, cron jobs with their last and next fire time; and its tables.

use chrono::{DateTime, SecondsFormat, Utc};
use lockward::recipe::cron::CronJob;
use lockward::{Holding, LockInfo, Store};
use serde::Serialize;

/// One held lock.
#[derive(Serialize)]
pub struct LockRow {
    pub name: String,
    /// The lock the row belongs to, and how it holds it (see [`kind_of`]).
    pub lock: String,
    pub kind: &'static str,
    pub owner: String,
    pub holder: Option<String>,
    pub fence: Option<u64>,
    pub expires_in_ms: Option<u128>,
    pub waiters: Option<usize>,
}

impl From<LockInfo> for LockRow {
    fn from(i: LockInfo) -> Self {
        let (lock, kind) = kind_of(&i);
        let lock = lock.to_string();
        LockRow {
            lock,
            kind,
            name: i.name,
            owner: i.owner,
            holder: i.label,
            fence: i.fence,
            expires_in_ms: i.expires_in.map(|d| d.as_millis()),
            waiters: i.waiters,
        }
    }
}

/// What a row holds: a reader's share of a read-write lock (a native
/// reader, a reader held as permits of the store's semaphore `LOCK#readers`,
/// or a slot of that semaphore's ledger), a writer waiting for readers to
/// finish (the line of `LOCK#readers`), or a plain lock (also a read-write
/// lock's writer); and the lock it belongs to.
fn kind_of(row: &LockInfo) -> (&str, &'static str) {
    match &row.holding {
        Holding::Reader { lock } => return (lock, "read"),
        Holding::Permits { semaphore } => {
            if let Some(lock) = semaphore.strip_suffix("#readers") {
                return (lock, "read");
            }
        }
        Holding::Lock => {}
    }
    // A slot of the readers' ledger, a lock of its own.
    if let Some((lock, slot)) = row.name.rsplit_once("#readers#permit/") {
        if !slot.is_empty() && slot.bytes().all(|b| b.is_ascii_hexdigit()) {
            return (lock, "read");
        }
    }
    if let Some(lock) = row.name.strip_suffix("#readers#line") {
        return (lock, "write (waiting for readers)");
    }
    (&row.name, "lock")
}

/// One election and who leads it.
#[derive(Serialize)]
pub struct ElectionRow {
    pub name: String,
    pub leader: Option<String>,
    pub epoch: Option<u64>,
    pub expires_in_ms: Option<u128>,
}

/// One cron job: its schedule, the latest fire time in its ledger and the
/// next one.
#[derive(Serialize)]
pub struct CronRow {
    pub name: String,
    pub expression: String,
    pub zone: String,
    pub last_fire: Option<String>,
    pub last_outcome: Option<String>,
    pub last_instance: Option<String>,
    pub next_fire: Option<String>,
}

/// Everything `status` shows, read at `at`.
#[derive(Serialize)]
pub struct Snapshot {
    pub at: String,
    pub locks: Vec<LockRow>,
    pub elections: Vec<ElectionRow>,
    pub cron: Vec<CronRow>,
}

/// Reads locks, elections and cron jobs whose names start with `prefix`.
pub async fn take(store: &Store, prefix: &str) -> lockward::Result<Snapshot> {
    let now = Utc::now();
    let locks = store
        .list(prefix)
        .await?
        .into_iter()
        .map(LockRow::from)
        .collect();
    let mut elections = Vec::new();
    for name in lockward::recipe::elections(store).await? {
        if !name.starts_with(prefix) {
            continue;
        }
        let holder = store.inspect(&name).await?;
        elections.push(ElectionRow {
            leader: holder
                .as_ref()
                .map(|h| h.label.clone().unwrap_or_else(|| h.owner.clone())),
            epoch: holder.as_ref().and_then(|h| h.fence),
            expires_in_ms: holder.and_then(|h| h.expires_in).map(|d| d.as_millis()),
            name,
        });
    }
    let mut cron = Vec::new();
    for job in CronJob::all_recorded(store.clone(), &crate::holder::label()).await? {
        if !job.name().starts_with(prefix) {
            continue;
        }
        // A fire time counts as missed once it is a second old, as in cron-log.
        let last = job
            .fire_time_before(now - chrono::Duration::seconds(1))
            .await?;
        let execution = last.as_ref().and_then(|l| l.execution.as_ref());
        cron.push(CronRow {
            name: job.name().to_string(),
            expression: job.expression().to_string(),
            zone: job.zone().to_string(),
            last_fire: last.as_ref().map(|l| time(l.fire_time)),
            last_outcome: last
                .as_ref()
                .map(|_| execution.map_or_else(|| "missed".to_string(), |e| e.outcome.to_string())),
            last_instance: execution.map(|e| e.instance.clone()),
            next_fire: job.next_fire_after(now).ok().map(time),
        });
    }
    Ok(Snapshot {
        at: time(now),
        locks,
        elections,
        cron,
    })
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The snapshot as text tables, one line each: locks (or a line saying
/// none are held), then elections and cron jobs when there are any.
pub fn render(snapshot: &Snapshot, address: &str) -> Vec<String> {
    let dash = || "-".to_string();
    let seconds =
        |ms: Option<u128>| ms.map_or_else(dash, |ms| format!("{:.1}s", ms as f64 / 1000.0));
    let mut lines = Vec::new();
    if snapshot.locks.is_empty() {
        lines.push(format!("no locks held on {address}"));
    } else {
        let rows = snapshot.locks.iter().map(|l| {
            vec![
                l.lock.clone(),
                l.kind.to_string(),
                l.holder
                    .clone()
                    .unwrap_or_else(|| l.owner.chars().take(12).collect()),
                l.fence.map_or_else(dash, |f| f.to_string()),
                seconds(l.expires_in_ms),
                l.waiters.map_or_else(dash, |w| w.to_string()),
            ]
        });
        table(
            &mut lines,
            &["NAME", "KIND", "HOLDER", "FENCE", "TIME LEFT", "WAITERS"],
            rows,
        );
    }
    if !snapshot.elections.is_empty() {
        lines.push(String::new());
        let rows = snapshot.elections.iter().map(|e| {
            vec![
                e.name.clone(),
                e.leader.clone().unwrap_or_else(|| "(none)".into()),
                e.epoch.map_or_else(dash, |f| f.to_string()),
                seconds(e.expires_in_ms),
            ]
        });
        table(
            &mut lines,
            &["ELECTION", "LEADER", "EPOCH", "LEASE LEFT"],
            rows,
        );
    }
    if !snapshot.cron.is_empty() {
        lines.push(String::new());
        let rows = snapshot.cron.iter().map(|c| {
            vec![
                c.name.clone(),
                format!("{} ({})", c.expression, c.zone),
                c.last_fire.clone().unwrap_or_else(dash),
                match (&c.last_outcome, &c.last_instance) {
                    (Some(o), Some(i)) => format!("{o} on {i}"),
                    (Some(o), None) => o.clone(),
                    _ => dash(),
                },
                c.next_fire.clone().unwrap_or_else(dash),
            ]
        });
        table(
            &mut lines,
            &["CRON", "SCHEDULE", "LAST FIRE", "OUTCOME", "NEXT FIRE"],
            rows,
        );
    }
    lines
}

/// Appends a header and rows in columns as wide as their widest cell.
fn table(lines: &mut Vec<String>, header: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    let rows: Vec<Vec<String>> = rows.collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    lines.push(line(header.to_vec()));
    for r in &rows {
        lines.push(line(r.iter().map(String::as_str).collect()));
    }
}
