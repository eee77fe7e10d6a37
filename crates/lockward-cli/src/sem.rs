//! `lockward sem NAME -n N -- CMD`: at most N runs of CMD at once, across
//! every host sharing the store.

use lockward::recipe::Semaphore;
use lockward::Store;

use crate::exit;
use crate::lease::LeaseArgs;
use crate::run::run_and_release;

/// Run CMD while holding one of N permits of NAME: at most N runs at once across hosts.
#[derive(clap::Args)]
pub struct SemArgs {
    /// The semaphore's name.
    pub name: String,
    /// How many runs may go on at once (1 to 64).
    #[arg(short = 'n', long = "permits")]
    pub permits: u32,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The command and its arguments, after `--`; `LOCKWARD_PERMIT` holds the slot.
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
        semaphore.try_acquire(&opts).await
    } else {
        semaphore.acquire(&opts).await
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
        ("LOCKWARD_PERMIT", permit.slot().to_string()),
        ("LOCKWARD_FENCE", permit.guard().fence().to_string()),
        ("LOCKWARD_STORE", store.address()),
    ];
    run_and_release(permit.into_guard(), &args.command, &env, grace)
        .await
        .0
}
