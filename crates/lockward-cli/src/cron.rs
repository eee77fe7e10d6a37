//! `lockward cron NAME 'EXPR' -- CMD` and `lockward cron-log NAME`.

use std::time::Duration;

use chrono::Utc;
use lockward::recipe::cron::{CronJob, CronOptions, Outcome, Overlap, Turn};
use lockward::Store;
use serde::Serialize;

use crate::exit;
use crate::lease::{parse_duration, parse_duration_or_zero};
use crate::stop::StopRequest;
use crate::supervise::{run_while, Ended};

/// Run CMD at each fire time of EXPR on exactly one of the instances running this line.
#[derive(clap::Args)]
pub struct CronArgs {
    /// The job's name.
    pub name: String,
    /// Cron expression: 5 fields, or 6 with a leading seconds field.
    pub expression: String,
    /// IANA time zone of the expression.
    #[arg(long, default_value = "UTC")]
    pub tz: String,
    /// Hold the lock at least this long after the start.
    #[arg(long, default_value = "0s", value_parser = parse_duration_or_zero)]
    pub lock_at_least: Duration,
    /// Hold it at most this long: CMD is stopped then. (Where a lock cannot
    /// live that long, as on ZooKeeper, it is renewed meanwhile.)
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub lock_at_most: Duration,
    /// When a fire time comes while the job still runs (on any instance):
    /// `forbid` skips it (written to the ledger), `allow` runs both,
    /// `replace` stops the running one, then runs the new one.
    #[arg(long, default_value = "forbid", value_parser = parse_overlap)]
    pub overlap: Overlap,
    /// Claim the fence in this PostgreSQL or MySQL database (tables
    /// guarded with `lockward fence install`) before CMD starts, and pass
    /// it to CMD (see `run --fence-db`).
    #[arg(long, env = "LOCKWARD_FENCE_DB", value_name = "URL")]
    pub fence_db: Option<String>,
    /// The command and its arguments, after `--`; `LOCKWARD_FIRE_TIME` holds the fire time.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Show the ledger of a cron job, with missed fire times marked.
#[derive(clap::Args)]
pub struct CronLogArgs {
    /// The job's name.
    pub name: String,
    /// The job's cron expression, if not the one its instances recorded.
    pub expression: Option<String>,
    /// IANA time zone of EXPRESSION.
    #[arg(long, default_value = "UTC")]
    pub tz: String,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

fn job(
    store: &Store,
    name: &str,
    expression: &str,
    zone: &str,
    options: CronOptions,
) -> Result<CronJob, u8> {
    CronJob::new(
        store.clone(),
        name,
        expression,
        zone,
        &crate::holder::label(),
        options,
    )
    .map_err(|e| {
        eprintln!("lockward: {e}");
        exit::for_error(&e)
    })
}

/// Runs CMD at each fire time on exactly one of the instances running the
/// same line, until SIGINT or SIGTERM: between fire times it exits 0 at
/// once; during a run the signal goes to CMD, and lockward records CMD's
/// outcome before it exits.
pub async fn cron(store: &Store, args: CronArgs) -> u8 {
    let Some(mut stop) = StopRequest::install() else {
        eprintln!("lockward: cannot install signal handlers");
        return exit::SOFTWARE;
    };
    // Runs that overlap would each claim a newer fence and refuse the
    // writes of the one still running.
    if args.fence_db.is_some() && args.overlap == Overlap::Allow {
        eprintln!("lockward: --fence-db needs one run at a time: use --overlap forbid or replace");
        return exit::USAGE;
    }
    let options = CronOptions {
        lock_at_least_for: args.lock_at_least,
        lock_at_most_for: args.lock_at_most,
        overlap: args.overlap,
        ..Default::default()
    };
    let job = match job(store, &args.name, &args.expression, &args.tz, options) {
        Ok(j) => j,
        Err(code) => return code,
    };
    if let Err(e) = job.record_schedule().await {
        eprintln!("lockward: {e}");
        return exit::for_error(&e);
    }
    // A quarter of the locks' TTL: where they are renewed (the store caps
    // their TTL below lock_at_most_for), of that TTL, which renewals move.
    let ttl = store.max_ttl().map_or(options.lock_at_most_for, |max| {
        max.min(options.lock_at_most_for)
    });
    let grace = (ttl / 4).max(Duration::from_millis(10));
    let mut after = Utc::now();
    loop {
        let fire = match job.next_fire_after(after) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("lockward: {e}");
                return exit::USAGE;
            }
        };
        after = fire;
        // A later fire time is due already (this instance ran long, was
        // paused or just started): this one is recorded missed, not run
        // late; only the latest due one runs.
        if job
            .next_fire_after(fire)
            .is_ok_and(|next| next <= Utc::now())
        {
            let why = format!(
                "a later fire time was due when {} got to it",
                crate::holder::label()
            );
            if let Err(e) = job.record_missed(fire, &why).await {
                eprintln!("lockward: fire time {fire}: {e}");
            }
            continue;
        }
        let wait = (fire - Utc::now()).to_std().unwrap_or_default();
        tokio::select! {
            signal = stop.requested() => return stopped(&args.name, signal),
            _ = tokio::time::sleep(wait) => {}
        }
        // Not cancelled midway: a claim half made would leave a ledger
        // record that says "running" for ever.
        let claim = match job.take_turn(fire).await {
            Ok(Turn::Run(c)) => c,
            Ok(Turn::Taken) => continue,
            Ok(Turn::Skipped { running }) => {
                eprintln!(
                    "lockward: fire time {fire} skipped: {} still runs on {running}",
                    args.name
                );
                continue;
            }
            Err(e) => {
                eprintln!("lockward: fire time {fire}: {e}");
                continue;
            }
        };
        let mut env = vec![
            ("LOCKWARD_NAME", args.name.clone()),
            ("LOCKWARD_FIRE_TIME", fire.to_rfc3339()),
            ("LOCKWARD_FENCE", claim.fence().to_string()),
        ];
        if let Some(db) = &args.fence_db {
            let fences = [(args.name.as_str(), claim.fence())];
            match crate::fence_db::claim(db, &fences, ttl / 3, false).await {
                Ok(fenced) => env.extend(fenced),
                // This fire time does not run; the next ones try again.
                Err(status) => {
                    let why = format!("its fence could not be claimed (lockward status {status})");
                    if let Err(e) = claim.finish(Outcome::Failed(why)).await {
                        eprintln!("lockward: recording fire time {fire}: {e}");
                    }
                    continue;
                }
            }
        }
        let held = claim.lost_signal();
        let replaced = async {
            claim.replaced().await;
            format!("a later fire time of {} replaces this one", args.name)
        };
        let outcome = match run_while(&held, &args.name, replaced, &args.command, &env, grace).await
        {
            Ended::Exited(0) => Outcome::Succeeded,
            Ended::Exited(code) => Outcome::Failed(format!("exit status {code}")),
            Ended::Lost => Outcome::Failed("stopped: lock_at_most_for passed".into()),
            Ended::Stopped => Outcome::Failed("stopped: replaced by a later fire time".into()),
            Ended::Failed(code) => {
                Outcome::Failed(format!("could not run (lockward status {code})"))
            }
        };
        if let Err(e) = claim.finish(outcome).await {
            eprintln!("lockward: recording fire time {fire}: {e}");
        }
        if let Some(signal) = stop.arrived() {
            return stopped(&args.name, signal);
        }
    }
}

fn stopped(name: &str, signal: &str) -> u8 {
    eprintln!("lockward: cron {name} stopped by {signal}");
    0
}

fn parse_overlap(text: &str) -> Result<Overlap, String> {
    text.parse().map_err(|e: lockward::Error| e.to_string())
}

#[derive(Serialize)]
struct Row {
    fire_time: String,
    missed: bool,
    skipped: bool,
    instance: Option<String>,
    start: Option<String>,
    end: Option<String>,
    outcome: Option<String>,
    fence: Option<u64>,
}

/// Prints the ledger of `name`, from its first recorded execution until
/// now, with the fire times nobody ran marked as missed. The schedule is
/// the one the job's instances recorded, unless `expression` is given.
pub async fn cron_log(store: &Store, args: CronLogArgs) -> u8 {
    let (name, zone, json) = (args.name.as_str(), args.tz.as_str(), args.json);
    let job = match args.expression.as_deref() {
        Some(expression) => match job(store, name, expression, zone, CronOptions::default()) {
            Ok(j) => j,
            Err(code) => return code,
        },
        None => match CronJob::recorded(store.clone(), name, &crate::holder::label()).await {
            Ok(Some(j)) => j,
            Ok(None) => {
                eprintln!("lockward: no schedule recorded for {name}; give its expression");
                return exit::USAGE;
            }
            Err(e) => {
                eprintln!("lockward: {e}");
                return exit::for_error(&e);
            }
        },
    };
    let since = match job.first_recorded().await {
        Ok(Some(t)) => t,
        Ok(None) => {
            if json {
                println!("[]");
            } else {
                println!("no executions of {name} recorded");
            }
            return 0;
        }
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    // A fire time counts as missed once it is a second old.
    let until = Utc::now() - chrono::Duration::seconds(1);
    let entries = match job.ledger(since, until).await {
        Ok(e) => e,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    let rows: Vec<Row> = entries
        .iter()
        .map(|e| Row {
            fire_time: e.fire_time.to_rfc3339(),
            missed: e
                .execution
                .as_ref()
                .is_none_or(|x| matches!(x.outcome, Outcome::Missed(_))),
            skipped: e
                .execution
                .as_ref()
                .is_some_and(|x| matches!(x.outcome, Outcome::Skipped(_))),
            instance: e.execution.as_ref().map(|x| x.instance.clone()),
            start: e.execution.as_ref().map(|x| x.start.to_rfc3339()),
            end: e
                .execution
                .as_ref()
                .and_then(|x| x.end.map(|t| t.to_rfc3339())),
            outcome: e.execution.as_ref().map(|x| x.outcome.to_string()),
            fence: e.execution.as_ref().map(|x| x.fence),
        })
        .collect();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("rows serialise")
        );
        return 0;
    }
    for r in &rows {
        match (&r.instance, &r.outcome) {
            (Some(_), Some(outcome)) if r.skipped => {
                println!("{}  SKIPPED  {outcome}", r.fire_time)
            }
            (Some(_), Some(outcome)) if r.missed => println!("{}  MISSED  {outcome}", r.fire_time),
            (Some(who), Some(outcome)) => println!("{}  {who}  {outcome}", r.fire_time),
            _ => println!("{}  MISSED", r.fire_time),
        }
    }
    0
}
