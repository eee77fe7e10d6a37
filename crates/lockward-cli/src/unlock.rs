//! `lockward unlock NAME --force`: ends a stuck holder's lease from
//! anywhere, after saying who holds it and, on a terminal, asking.

use std::io::{BufRead, IsTerminal, Write};

use lockward::{Error, LockInfo, Store};

use crate::exit;

/// End the current holder's lease on NAME (its command is stopped at its
/// next renewal; the next holder's fence is larger).
#[derive(clap::Args)]
pub struct UnlockArgs {
    /// The lock to free.
    pub name: String,
    /// End the lease although this process does not hold it. Required:
    /// the holder may still be working.
    #[arg(long)]
    pub force: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// Exit status when the user answers no.
const DECLINED: u8 = 1;

/// Shows the holder, asks unless `--yes`, and ends its lease.
pub async fn unlock(store: &Store, args: UnlockArgs) -> u8 {
    if !args.force {
        eprintln!(
            "lockward: unlock ends another process's lease while it may still be working; \
             say --force to mean it"
        );
        return exit::USAGE;
    }
    let name = args.name.as_str();
    let holder = match store.inspect(name).await {
        Ok(Some(holder)) => holder,
        Ok(None) => {
            println!("{name} is not held");
            return 0;
        }
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::for_error(&e);
        }
    };
    let who = describe(&holder);
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            eprintln!(
                "lockward: {name} is held by {who}; not on a terminal, so add --yes to end it"
            );
            return exit::USAGE;
        }
        if !confirmed(&format!(
            "{name} is held by {who}. End its lease? Its command is stopped at its next renewal. [y/N] "
        )) {
            println!("left {name} as it was");
            return DECLINED;
        }
    }
    match store.force_unlock(name, &holder).await {
        Ok(None) => {
            println!("ended the lease of {who} on {name}; the next holder gets a larger fence");
            0
        }
        Ok(Some(held_back)) => {
            println!(
                "ended the lease of {who} on {name}; it asked for a lock-delay, so {name} stays \
                 taken until its lease would have run out ({:.1}s); the next holder gets a \
                 larger fence",
                held_back.as_secs_f64()
            );
            0
        }
        Err(Error::NotOwner { .. }) => {
            eprintln!(
                "lockward: {name} changed hands since it was read (no longer {who}); look again"
            );
            exit::NOT_ACQUIRED
        }
        Err(e) => {
            eprintln!("lockward: {e}");
            exit::for_error(&e)
        }
    }
}

/// `label (owner …, fence N, 12.3s left)`.
fn describe(holder: &LockInfo) -> String {
    let mut parts = vec![format!("owner {}", holder.owner)];
    if let Some(fence) = holder.fence {
        parts.push(format!("fence {fence}"));
    }
    if let Some(left) = holder.expires_in {
        parts.push(format!("{:.1}s left", left.as_secs_f64()));
    }
    let label = holder.label.as_deref().unwrap_or("a holder");
    format!("{label} ({})", parts.join(", "))
}

/// Asks on stderr and reads one line from stdin: yes only for `y`/`yes`.
fn confirmed(question: &str) -> bool {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
