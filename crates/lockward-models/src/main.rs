//! `lockward-models`: checks a model and prints what it found, or serves
//! stateright's explorer to walk its runs step by step.
//!
//! ```text
//! cargo run -p lockward-models -- check lost-writes [hybrid|incr]
//! cargo run -p lockward-models -- check lease-deadline [from-request|from-reply|no-drift]
//! cargo run -p lockward-models -- check redlock [largest|without-clock|first-reading]
//! cargo run -p lockward-models -- check fence-claim [to-the-commit|for-the-statement|without-the-lock]
//! cargo run -p lockward-models -- check redis-line [lockward|ignore-the-line|pushed-only]
//! cargo run -p lockward-models -- explore MODEL [VARIANT]   # http://127.0.0.1:3000
//! ```

use std::process::ExitCode;

use lockward_models::fence_claim::{Check, FenceClaim};
use lockward_models::lease_deadline::{Deadline, LeaseDeadline};
use lockward_models::lost_writes::{LostWrites, Rule};
use lockward_models::redis_line::{self, RedisLine};
use lockward_models::redlock::{Redlock, Token};
use stateright::{Checker, Model};

const USAGE: &str = "usage: lockward-models check|explore lost-writes [hybrid|incr]\n       lockward-models check|explore lease-deadline [from-request|from-reply|no-drift]\n       lockward-models check|explore redlock [largest|without-clock|first-reading]\n       lockward-models check|explore fence-claim [to-the-commit|for-the-statement|without-the-lock]\n       lockward-models check|explore redis-line [lockward|ignore-the-line|pushed-only]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (command, model, variant) = match args.as_slice() {
        [command, model] => (*command, *model, None),
        [command, model, variant] => (*command, *model, Some(*variant)),
        _ => return usage(),
    };
    if !matches!(command, "check" | "explore") {
        return usage();
    }
    match (model, variant) {
        ("lost-writes", None | Some("hybrid")) => run(command, LostWrites::checked(Rule::Hybrid)),
        ("lost-writes", Some("incr")) => run(command, LostWrites::checked(Rule::Incr)),
        ("lease-deadline", None | Some("from-request")) => {
            run(command, LeaseDeadline::checked(Deadline::FromRequest))
        }
        ("lease-deadline", Some("from-reply")) => {
            run(command, LeaseDeadline::checked(Deadline::FromReply))
        }
        ("lease-deadline", Some("no-drift")) => {
            run(command, LeaseDeadline::checked(Deadline::NoDrift))
        }
        ("redlock", None | Some("largest")) => {
            run(command, Redlock::checked(Token::LargestWithClock))
        }
        ("redlock", Some("without-clock")) => {
            run(command, Redlock::checked(Token::LargestWithoutClock))
        }
        ("redlock", Some("first-reading")) => run(command, Redlock::checked(Token::FirstReading)),
        ("fence-claim", None | Some("to-the-commit")) => {
            run(command, FenceClaim::checked(Check::HeldToTheCommit))
        }
        ("fence-claim", Some("for-the-statement")) => {
            run(command, FenceClaim::checked(Check::HeldForTheStatement))
        }
        ("fence-claim", Some("without-the-lock")) => {
            run(command, FenceClaim::checked(Check::WithoutTheLock))
        }
        ("redis-line", None | Some("lockward")) => {
            run(command, RedisLine::checked(redis_line::Rule::Lockward))
        }
        ("redis-line", Some("ignore-the-line")) => {
            run(command, RedisLine::checked(redis_line::Rule::IgnoreTheLine))
        }
        ("redis-line", Some("pushed-only")) => {
            run(command, RedisLine::checked(redis_line::Rule::PushedOnly))
        }
        _ => usage(),
    }
}

fn usage() -> ExitCode {
    eprintln!("{USAGE}");
    ExitCode::from(2)
}

fn run<M>(command: &str, model: M) -> ExitCode
where
    M: Model + std::fmt::Debug + Send + Sync + 'static,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    if command == "explore" {
        println!("serving the explorer at http://127.0.0.1:3000 (Ctrl-C ends it)");
        let checker = model.checker().serve("127.0.0.1:3000");
        println!("{} states", checker.unique_state_count());
        return ExitCode::SUCCESS;
    }
    let bounds = format!("{model:?}");
    let checked = lockward_models::check(model);
    println!(
        "{bounds}: {} states, depth {}",
        checked.states, checked.depth
    );
    for (property, found) in &checked.discoveries {
        println!("  {property}: {}", if *found { "found" } else { "none" });
    }
    ExitCode::SUCCESS
}
