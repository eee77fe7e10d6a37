//! `lockward doctor [--json]`: checks the store before people trust it.

use lockward::doctor::{diagnose, Finding, Level};
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
    /// Also check a PostgreSQL database whose tables `lockward fence
    /// install` guards: the guard on each table and partition, who may
    /// claim, and settings that let writes go around it.
    #[arg(long, env = "LOCKWARD_FENCE_DB", value_name = "URL")]
    pub fence_db: Option<String>,
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
    let mut findings = diagnose(&parsed).await;
    if let Some(db) = &args.fence_db {
        findings.extend(fence_db_findings(db).await);
    }
    // The cgroup probe starts, ends and waits for a process: off the runtime.
    findings.extend(
        tokio::task::spawn_blocking(command_tree_findings)
            .await
            .unwrap_or_else(|e| {
                vec![Finding {
                    level: Level::Error,
                    check: "command tree".into(),
                    detail: format!("the check did not finish: {e}"),
                    advice: String::new(),
                }]
            }),
    );
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

/// Which layers bound a supervised command's tree on this machine (see
/// `crate::keeper` and `crate::cgroup`), each tried for real.
fn command_tree_findings() -> Vec<Finding> {
    let finding = |level, check: &str, detail: String, advice: &str| Finding {
        level,
        check: check.to_string(),
        detail,
        advice: advice.to_string(),
    };
    let mut out = Vec::new();
    crate::supervise::tree::become_subreaper();
    out.push(if crate::supervise::tree::is_subreaper() {
        finding(
            Level::Ok,
            "command tree: subreapers",
            "lockward and its keeper adopt the command's orphans: a killed keeper's tree is \
             ended by lockward, a killed lockward's by the keeper, before the lock can pass"
                .into(),
            "",
        )
    } else {
        finding(
            Level::Warning,
            "command tree: subreapers",
            "this system has no child subreapers: a command's orphans are not bounded by the lock"
                .into(),
            "fence every write the command makes",
        )
    });
    out.push(match crate::supervise::cgroup::probe() {
        Ok(parent) => finding(
            Level::Ok,
            "command tree: cgroup",
            format!(
                "each command runs in a cgroup of its own under {}, ended with cgroup.kill by \
                 lockward, the keeper or the warden: any two of them may die",
                parent.display()
            ),
            "",
        ),
        Err(why) => finding(
            Level::Warning,
            "command tree: cgroup",
            format!(
                "no cgroup layer ({why}): if lockward and its keeper are killed at the same \
                 moment, the command dies but what it started runs on"
            ),
            "give lockward a writable cgroup v2 (systemd: Delegate=yes; a container with its \
             own cgroup namespace) or fence every write",
        ),
    });
    out
}

/// The findings on the guarded database `url`.
async fn fence_db_findings(url: &str) -> Vec<Finding> {
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    {
        match lockward::fence::FenceDb::connect(url).await {
            Ok(db) => db.diagnose().await,
            Err(e) => vec![Finding {
                level: Level::Error,
                check: "fence db: reachable".into(),
                detail: e.to_string(),
                advice: String::new(),
            }],
        }
    }
    #[cfg(not(any(feature = "postgres", feature = "mysql")))]
    {
        let _ = url;
        vec![Finding {
            level: Level::Error,
            check: "fence db".into(),
            detail: "this build of lockward lacks its `postgres` and `mysql` features".into(),
            advice: String::new(),
        }]
    }
}
