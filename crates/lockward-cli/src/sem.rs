//! `lockward sem NAME -n N [--take K] -- CMD`: CMD runs while it holds K of
//! N permits, across every host sharing the store.

use lockward::recipe::Semaphore;
use lockward::Store;

use crate::exit;
use crate::lease::LeaseArgs;
use crate::supervise::run_and_release;

/// Run CMD while holding K of N permits of NAME: runs share N permits across hosts.
#[derive(clap::Args)]
pub struct SemArgs {
    /// The semaphore's name.
    pub name: String,
    /// How many permits the semaphore has (1 to 1,000,000,000).
    #[arg(short = 'n', long = "permits")]
    pub permits: u32,
    /// How many of them this run takes (1 to N): a heavy job takes more.
    #[arg(short = 'k', long = "take", default_value_t = 1)]
    pub take: u32,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The command and its arguments, after `--`; `LOCKWARD_PERMIT` names the holder among the semaphore's (its slot number where the store keeps a ledger), `LOCKWARD_PERMITS` how many it took.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Takes a permit, runs CMD under it, and returns lockward's exit status.
pub async fn sem(store: &Store, args: SemArgs) -> u8 {
    let (opts, grace) = match args.lease.options(store) {
        Ok(checked) => checked,
        Err(status) => return status,
    };
    let semaphore = match Semaphore::new(store.clone(), &args.name, args.permits) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    let acquired = if args.lease.no_wait {
        semaphore.try_acquire_many(args.take, &opts).await
    } else {
        semaphore.acquire_many(args.take, &opts).await
    };
    let permit = match acquired {
        Ok(permit) => permit,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    let env = vec![
        ("LOCKWARD_NAME", args.name.clone()),
        ("LOCKWARD_PERMIT", permit.holder()),
        ("LOCKWARD_PERMITS", permit.permits().to_string()),
        ("LOCKWARD_FENCE", permit.guard().fence().to_string()),
        ("LOCKWARD_STORE", store.address()),
    ];
    let slot = permit.slot();
    let status = run_and_release(permit.into_guard(), &args.command, &env, grace)
        .await
        .0;
    // The slot is free: give its permits back at once (else they come back
    // when the semaphore next runs short).
    if let Some(slot) = slot {
        if let Err(e) = semaphore.forget(slot).await {
            eprintln!("lockward: {e}");
        }
    }
    status
}
