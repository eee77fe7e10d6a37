//! `lockward elect NAME -- CMD`: CMD runs only while this instance leads.

use std::time::Duration;

use lockward::recipe::{Candidate, ElectionConfig};
use lockward::Store;

use crate::exit;
use crate::lease::parse_duration;
use crate::stop::StopRequest;
use crate::supervise::{run_under, Ended};

/// Run CMD only while this instance leads the election NAME.
#[derive(clap::Args)]
pub struct ElectArgs {
    /// The election's name.
    pub name: String,
    /// This candidate's identity, shown as the leader (default host:pid).
    #[arg(long)]
    pub identity: Option<String>,
    /// How long the store keeps the leader's lease without renewal
    /// [default: 15s, or the longest the store allows when that is shorter:
    /// on ZooKeeper the session timeout; the two below then scale with it].
    #[arg(long, value_parser = parse_duration)]
    pub lease: Option<Duration>,
    /// How long the leader keeps leading while renewals fail (< lease)
    /// [default: 2/3 of the lease].
    #[arg(long, value_parser = parse_duration)]
    pub renew_deadline: Option<Duration>,
    /// How often the leader renews (< renew deadline) [default: 2/15 of the
    /// lease].
    #[arg(long, value_parser = parse_duration)]
    pub retry: Option<Duration>,
    /// Claim the fence in this PostgreSQL or MySQL database (tables
    /// guarded with `lockward fence install`) before CMD starts, and pass
    /// it to CMD (see `run --fence-db`).
    #[arg(long, env = "LOCKWARD_FENCE_DB", value_name = "URL")]
    pub fence_db: Option<String>,
    /// The command and its arguments, after `--`; `LOCKWARD_EPOCH` holds the epoch.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Campaigns, runs CMD while leading, campaigns again after a revoke; exits
/// with CMD's status when CMD ends by itself (or after a SIGINT or SIGTERM
/// forwarded to it), and with 0 when one of those comes while campaigning.
///
/// CMD gets SIGTERM when renewals have failed for the renew deadline and
/// SIGKILL when the lease's local deadline comes, so it is gone before the
/// store can give the lease to another candidate; and if lockward dies,
/// even by SIGKILL, CMD dies with it.
pub async fn elect(store: &Store, args: ElectArgs) -> u8 {
    // client-go's 15 s / 10 s / 2 s, shortened together where the store
    // bounds a lease (ZooKeeper sessions).
    let lease = args.lease.unwrap_or_else(|| {
        store.max_ttl().map_or(Duration::from_secs(15), |max| {
            max.min(Duration::from_secs(15))
        })
    });
    let config = ElectionConfig {
        lease_duration: lease,
        renew_deadline: args.renew_deadline.unwrap_or(lease * 2 / 3),
        retry_period: args.retry.unwrap_or(lease * 2 / 15),
    };
    let identity = args.identity.clone().unwrap_or_else(crate::holder::label);
    let candidate = match Candidate::new(store.clone(), &args.name, &identity, config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    let Some(mut stop) = StopRequest::install() else {
        eprintln!("lockward: cannot install signal handlers");
        return exit::SOFTWARE;
    };
    // Between the renew deadline and the lease's deadline.
    let grace = config.lease_duration - config.renew_deadline;
    loop {
        eprintln!("lockward: {identity} campaigns for {}", args.name);
        let campaigned = tokio::select! {
            signal = stop.requested() => return stopped(&args.name, signal),
            campaigned = candidate.campaign() => campaigned,
        };
        let leadership = match campaigned {
            Ok(l) => l,
            Err(e) => {
                eprintln!("lockward: {e}");
                return exit::for_error(&e);
            }
        };
        let epoch = leadership.epoch();
        eprintln!(
            "lockward: {identity} elected leader of {} (epoch {epoch})",
            args.name
        );
        let mut env = vec![
            ("LOCKWARD_NAME", args.name.clone()),
            ("LOCKWARD_EPOCH", epoch.to_string()),
            ("LOCKWARD_FENCE", epoch.to_string()),
            ("LOCKWARD_IDENTITY", identity.clone()),
        ];
        if let Some(db) = &args.fence_db {
            let fences = [(args.name.as_str(), epoch)];
            match crate::fence_db::claim(db, &fences, config.lease_duration / 3, false).await {
                Ok(fenced) => env.extend(fenced),
                Err(status) => {
                    let _ = leadership.resign().await;
                    return status;
                }
            }
        }
        let ended = run_under(leadership.guard(), &args.command, &env, grace).await;
        let _ = leadership.resign().await;
        match ended {
            Ended::Exited(code) | Ended::Failed(code) => return code,
            Ended::Lost | Ended::Stopped => {
                eprintln!("lockward: {identity} lost the leadership of {} (epoch {epoch}); the command was stopped", args.name);
                if let Some(signal) = stop.arrived() {
                    return stopped(&args.name, signal);
                }
                tokio::time::sleep(rejoin_pause()).await;
            }
        }
    }
}

fn stopped(name: &str, signal: &str) -> u8 {
    eprintln!("lockward: elect {name} stopped by {signal} while not leading");
    0
}

/// A short pause, different per process, before campaigning again, so a
/// flapping instance does not retake the lease at once.
fn rejoin_pause() -> Duration {
    Duration::from_millis(u64::from(std::process::id()) * 7919 % 50 + 10)
}
