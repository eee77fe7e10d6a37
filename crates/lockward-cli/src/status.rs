//! `lockward status [PREFIX]`: the locks held now.

use lockward::{LockInfo, Store};
use serde::Serialize;

use crate::exit;

#[derive(Serialize)]
struct Row<'a> {
    name: &'a str,
    /// The lock the row belongs to, and how it holds it (see [`kind_of`]).
    lock: &'a str,
    kind: &'static str,
    owner: &'a str,
    holder: Option<&'a str>,
    fence: Option<u64>,
    expires_in_ms: Option<u128>,
    waiters: Option<usize>,
}

impl<'a> From<&'a LockInfo> for Row<'a> {
    fn from(i: &'a LockInfo) -> Self {
        let (lock, kind) = kind_of(&i.name);
        Row {
            name: &i.name,
            lock,
            kind,
            owner: &i.owner,
            holder: i.holder.as_deref(),
            fence: i.fence,
            expires_in_ms: i.expires_in.map(|d| d.as_millis()),
            waiters: i.waiters,
        }
    }
}

/// What a held lock name is: a reader of a read-write lock (a slot of
/// `LOCK#readers`, or a native reader's row `LOCK#reader/OWNER`), a writer waiting for readers to finish (the line of
/// `LOCK#readers`), or a plain lock (also a read-write lock's writer); and
/// the lock it belongs to.
fn kind_of(name: &str) -> (&str, &'static str) {
    if let Some((lock, slot)) = name.rsplit_once("#readers#permit/") {
        if slot.bytes().all(|b| b.is_ascii_digit()) {
            return (lock, "read");
        }
    }
    // A native reader's row (PostgreSQL advisory mode): NAME#reader/OWNER.
    if let Some((lock, owner)) = name.rsplit_once("#reader/") {
        if !owner.is_empty() && owner.bytes().all(|b| b.is_ascii_hexdigit()) {
            return (lock, "read");
        }
    }
    if let Some(lock) = name.strip_suffix("#readers#line") {
        return (lock, "write (waiting for readers)");
    }
    (name, "lock")
}

/// List held locks: name, kind (lock, read), holder, fence, time left, waiters.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// Only locks whose name starts with PREFIX.
    #[arg(default_value = "")]
    pub prefix: String,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// Prints the held locks under the prefix, as a table or JSON.
pub async fn status(store: &Store, args: StatusArgs) -> u8 {
    let (prefix, json) = (args.prefix.as_str(), args.json);
    let held = match store.list(prefix).await {
        Ok(held) => held,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    if json {
        let rows: Vec<Row> = held.iter().map(Row::from).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("rows serialise")
        );
        return 0;
    }
    if held.is_empty() {
        println!("no locks held on {}", store.address());
        return 0;
    }
    let dash = || "-".to_string();
    let table: Vec<[String; 6]> = held
        .iter()
        .map(|i| {
            let (lock, kind) = kind_of(&i.name);
            [
                lock.to_string(),
                kind.to_string(),
                i.holder
                    .clone()
                    .unwrap_or_else(|| i.owner.chars().take(12).collect()),
                i.fence.map_or_else(dash, |f| f.to_string()),
                i.expires_in
                    .map_or_else(dash, |d| format!("{:.1}s", d.as_secs_f64())),
                i.waiters.map_or_else(dash, |w| w.to_string()),
            ]
        })
        .collect();
    let header = ["NAME", "KIND", "HOLDER", "FENCE", "TIME LEFT", "WAITERS"];
    let widths: Vec<usize> = (0..6)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 6]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header);
    for r in &table {
        line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]);
    }
    0
}
