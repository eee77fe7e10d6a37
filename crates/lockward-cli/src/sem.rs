//! `lockward sem NAME -n N -- CMD`: at most N runs of CMD at once, across
//! every host sharing the store.

use std::time::Duration;

use lockward::recipe::Semaphore;
use lockward::Store;

use crate::exit;
use crate::run::{lock_options, run_and_release};

/// What `sem` was asked to do.
pub struct SemArgs {
    pub name: String,
    pub permits: u32,
    pub ttl: Duration,
    pub wait: Option<Duration>,
    pub no_wait: bool,
    pub grace: Option<Duration>,
    pub command: Vec<String>,
}

/// Takes a permit, runs CMD under it, and returns lockward's exit status.
pub async fn sem(store: &Store, args: SemArgs) -> u8 {
    let (opts, grace) = match lock_options(args.ttl, args.grace, args.wait) {
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
    let acquired = if args.no_wait {
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
