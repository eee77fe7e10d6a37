//! `lockward doctor [--json]`: checks the store before people trust it.

use lockward::doctor::{diagnose, Level};
use lockward::StoreUrl;

use crate::exit;

/// Check the store: reachable, version, round trip, clock offset, settings that weaken guarantees, and a short mutual-exclusion and fence probe.
#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 when no finding is an error; 69 when the store cannot be reached; 1 for other errors."
)]
pub struct DoctorArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// Prints the findings; exit status 0 when none is an error, 69 when the
/// store cannot be reached, 1 for any other error.
pub async fn doctor(url: &str, args: DoctorArgs) -> u8 {
    let json = args.json;
    let parsed = match StoreUrl::parse(url) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::USAGE;
        }
    };
    let findings = diagnose(&parsed).await;
    if json {
        let list: Vec<serde_json::Value> = findings
            .iter()
            .map(|f| {
                serde_json::json!({
                    "level": f.level.as_str(),
                    "check": f.check,
                    "detail": f.detail,
                    "advice": f.advice,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({ "store": parsed.to_string(), "findings": list })
        );
    } else {
        println!("lockward doctor: {parsed}");
        for f in &findings {
            println!("{:<8} {:<28} {}", f.level.as_str(), f.check, f.detail);
            if !f.advice.is_empty() {
                println!("{:<8} {:<28} → {}", "", "", f.advice);
            }
        }
    }
    let unreachable = findings
        .iter()
        .any(|f| f.level == Level::Error && f.check == "reachable");
    if unreachable {
        exit::UNAVAILABLE
    } else if findings.iter().any(|f| f.level == Level::Error) {
        1
    } else {
        0
    }
}
