//! `lockward-models`: checks a model and prints what it found, or serves
//! stateright's explorer to walk its runs step by step.
//!
//! ```text
//! cargo run -p lockward-models -- check lost-writes [hybrid|incr]
//! cargo run -p lockward-models -- explore lost-writes [hybrid|incr]   # http://127.0.0.1:3000
//! ```

use std::process::ExitCode;

use lockward_models::lost_writes::{LostWrites, Rule};
use stateright::Model;

const USAGE: &str = "usage: lockward-models check|explore lost-writes [hybrid|incr]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (command, rule) = match args.as_slice() {
        [command, "lost-writes"] => (*command, Rule::Hybrid),
        [command, "lost-writes", "hybrid"] => (*command, Rule::Hybrid),
        [command, "lost-writes", "incr"] => (*command, Rule::Incr),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let model = LostWrites {
        rule,
        skew: 2,
        gap: 5,
        horizon: 20,
        losses: 3,
    };
    match command {
        "check" => {
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
        "explore" => {
            println!("serving the explorer at http://127.0.0.1:3000 (Ctrl-C ends it)");
            model.checker().serve("127.0.0.1:3000");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
