//! `lockward fence`: guard a database's tables so that the database itself
//! refuses a write carrying an older fence than the lock's last claimed
//! one, and look after what is guarded.

use std::time::Duration;

use lockward::fence::{FenceDb, Unfenced};

use crate::exit;

mod bench;

/// Guard tables so PostgreSQL or MySQL refuses writes from a holder that lost its lock.
#[derive(clap::Args)]
pub struct FenceArgs {
    #[command(subcommand)]
    action: Action,
}

/// The database whose tables are guarded.
#[derive(clap::Args)]
struct Db {
    /// The database (postgres://USER:PASSWORD@HOST:PORT/DB, or mysql://…).
    #[arg(long, env = "LOCKWARD_FENCE_DB", value_name = "URL")]
    db: String,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Guard TABLE… (on PostgreSQL, each partition too) by lock NAME's fence: from then on
    /// a write is refused unless it carries the fence last claimed for NAME
    /// (`lockward run NAME --fence-db URL` claims it and passes it on).
    /// Running it again changes nothing.
    Install {
        #[command(flatten)]
        db: Db,
        /// The tables, as `table` or `schema.table`.
        #[arg(required = true, value_name = "TABLE")]
        tables: Vec<String>,
        /// The lock whose fence writes to them must carry.
        #[arg(long, value_name = "NAME")]
        lock: String,
        /// What to do with a write that carries no fence: refuse (the
        /// default: a pooler, an `options=` in a connection string or a
        /// missing init command drops the setting silently) or allow (the table has other writers
        /// that hold no lock).
        #[arg(long, value_enum, default_value_t = UnfencedArg::Refuse)]
        unfenced: UnfencedArg,
        /// A role (MySQL: an account, USER or USER@HOST), besides the one
        /// installing, that may claim fences (the one `lockward run
        /// --fence-db` connects as).
        #[arg(long, value_name = "ROLE")]
        claimer: Option<String>,
    },
    /// Remove the guard from TABLE… (on PostgreSQL, each partition too).
    Uninstall {
        #[command(flatten)]
        db: Db,
        #[arg(value_name = "TABLE")]
        tables: Vec<String>,
        /// Also drop lockward's schema (MySQL: its table and routines) and
        /// the stored fences, once no table is guarded.
        #[arg(long)]
        purge: bool,
    },
    /// Show the guarded tables and each lock's stored fence.
    Status {
        #[command(flatten)]
        db: Db,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Claim FENCE for lock NAME, as a holder does right after acquiring
    /// it (waits for transactions that wrote under the old fence).
    Claim {
        #[command(flatten)]
        db: Db,
        #[arg(value_name = "NAME")]
        name: String,
        #[arg(value_name = "FENCE")]
        fence: u64,
        /// How long to wait for open transactions under the old fence.
        #[arg(long, default_value = "10s", value_parser = crate::lease::parse_duration)]
        within: Duration,
        /// Halfway through the wait, end the sessions holding the claim up
        /// (their open transactions roll back).
        #[arg(long)]
        end_stale: bool,
    },
    /// Measure what the guard costs: a bulk INSERT and a one-row UPDATE
    /// loop on a guarded table beside a plain one, and a claim, beside a
    /// round trip (makes and drops its own tables).
    Bench {
        #[command(flatten)]
        db: Db,
        /// Rows of the bulk INSERT.
        #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
        rows: u32,
        /// How long each UPDATE round runs.
        #[arg(long, default_value = "2s", value_parser = crate::lease::parse_duration)]
        duration: Duration,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Set lock NAME's stored fence, also downwards: a repair (e.g. after
    /// the lock moved to a store whose fences are smaller).
    Reset {
        #[command(flatten)]
        db: Db,
        #[arg(value_name = "NAME")]
        name: String,
        /// The fence to store.
        #[arg(long, value_name = "FENCE")]
        to: u64,
        /// Confirm: writers under any other fence are refused from then on.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(clap::ValueEnum, Clone, Copy)]
enum UnfencedArg {
    Refuse,
    Allow,
}

/// Runs the subcommand; returns lockward's exit status.
pub async fn fence(args: FenceArgs) -> u8 {
    let (Action::Install { db, .. }
    | Action::Uninstall { db, .. }
    | Action::Status { db, .. }
    | Action::Claim { db, .. }
    | Action::Bench { db, .. }
    | Action::Reset { db, .. }) = &args.action;
    let mut guard = match FenceDb::connect(&db.db).await {
        Ok(guard) => guard,
        Err(e) => return failed(&e),
    };
    match args.action {
        Action::Install {
            tables,
            lock,
            unfenced,
            claimer,
            ..
        } => {
            let unfenced = match unfenced {
                UnfencedArg::Refuse => Unfenced::Refuse,
                UnfencedArg::Allow => Unfenced::Allow,
            };
            match guard
                .install(&tables, &lock, unfenced, claimer.as_deref())
                .await
            {
                Ok(guarded) => {
                    for table in guarded {
                        println!("guarded {table} by the fence of lock {lock}");
                    }
                    0
                }
                Err(e) => failed(&e),
            }
        }
        Action::Uninstall { tables, purge, .. } => match guard.uninstall(&tables, purge).await {
            Ok(removed) => {
                for table in removed {
                    println!("unguarded {table}");
                }
                if purge {
                    println!("dropped lockward's schema and its stored fences");
                }
                0
            }
            Err(e) => failed(&e),
        },
        Action::Status { json, .. } => status(&guard, json).await,
        Action::Bench {
            db,
            rows,
            duration,
            json,
        } => bench::bench(&mut guard, &db.db, rows, duration, json).await,
        Action::Claim {
            name,
            fence,
            within,
            end_stale,
            ..
        } => {
            let claimed = match end_stale {
                true => guard.claim_ending_stale(&name, fence, within).await,
                false => guard
                    .claim(&name, fence, within)
                    .await
                    .map(|s| (s, Vec::new())),
            };
            match claimed {
                Ok((stored, ended)) => {
                    for session in ended {
                        println!("ended {session}");
                    }
                    println!("lock {name}: fence {stored} claimed");
                    0
                }
                Err(e) => failed(&e),
            }
        }
        Action::Reset { name, to, yes, .. } => {
            if !yes {
                eprintln!(
                    "lockward: resetting the fence of {name} to {to} refuses every writer under another fence; add --yes"
                );
                return exit::USAGE;
            }
            match guard.reset(&name, to).await {
                Ok(()) => {
                    println!("lock {name}: stored fence set to {to}");
                    0
                }
                Err(e) => failed(&e),
            }
        }
    }
}

async fn status(guard: &FenceDb, json: bool) -> u8 {
    let (tables, fences) = match (guard.guarded().await, guard.fences().await) {
        (Ok(tables), Ok(fences)) => (tables, fences),
        (Err(e), _) | (_, Err(e)) => return failed(&e),
    };
    if json {
        let value = serde_json::json!({
            "tables": tables.iter().map(|t| serde_json::json!({
                "table": t.table,
                "lock": t.lock,
                "unfenced": match t.unfenced { Unfenced::Refuse => "refuse", Unfenced::Allow => "allow" },
                "enabled": t.enabled,
            })).collect::<Vec<_>>(),
            "fences": fences.iter().map(|f| serde_json::json!({
                "lock": f.lock,
                "fence": f.fence,
                "raised_at": f.raised_at,
                "raised_by": f.raised_by,
            })).collect::<Vec<_>>(),
        });
        println!("{value:#}");
        return 0;
    }
    if tables.is_empty() {
        println!("no guarded tables");
    }
    for t in &tables {
        let unfenced = match t.unfenced {
            Unfenced::Refuse => "refused",
            Unfenced::Allow => "allowed",
        };
        let state = if t.enabled {
            ""
        } else {
            "  GUARD OFF (a trigger disabled or missing): writes go around it"
        };
        println!(
            "{}  lock {}  writes without a fence {unfenced}{state}",
            t.table, t.lock
        );
    }
    for f in &fences {
        println!(
            "lock {}  fence {}  claimed at {} by {}",
            f.lock, f.fence, f.raised_at, f.raised_by
        );
    }
    0
}

/// Says what failed; a stale claim (a newer fence is stored) is 76, as a
/// lost lock.
fn failed(e: &lockward::Error) -> u8 {
    eprintln!("lockward: {e}");
    match e {
        lockward::Error::Stale { .. } => exit::LOST,
        other => exit::for_error(other),
    }
}
