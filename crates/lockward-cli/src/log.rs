//! The CLI's log lines: lockward's spans and events (acquire, renew,
//! release, loss, each recipe step) on stderr, filtered as `LOCKWARD_LOG`
//! (else `RUST_LOG`) says, as text or as one JSON object per line.

use std::io::IsTerminal;

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::EnvFilter;

use crate::exit;

/// What is logged when neither variable is set: warnings and errors, such
/// as a failed renewal being retried or a lost lease.
const DEFAULT_FILTER: &str = "warn";

/// The demo's default: it loses leases on purpose (the paused holder), so
/// a lost lease is not worth a warning above its table.
pub const DEMO_FILTER: &str = "warn,lockward::renewer=error";

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// Installs the subscriber for the whole process, filtered as the
/// environment says, else by `default` (else [`DEFAULT_FILTER`]). An exit
/// status when the filter in the environment cannot be read.
pub fn init(format: LogFormat, default: Option<&str>) -> Result<(), u8> {
    let (variable, directives) = ["LOCKWARD_LOG", "RUST_LOG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().map(|d| (*v, d)))
        .unwrap_or(("", default.unwrap_or(DEFAULT_FILTER).to_string()));
    let filter = EnvFilter::builder().parse(&directives).map_err(|e| {
        eprintln!(
            "lockward: {variable}={directives:?} is not a log filter such as lockward=debug: {e}"
        );
        exit::USAGE
    })?;
    // A span's close line carries its fields (name, fence, store) and how
    // long it took.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_span_events(FmtSpan::CLOSE)
        .with_target(true);
    let installed = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    installed.map_err(|e| {
        eprintln!("lockward: cannot set up logging: {e}");
        exit::SOFTWARE
    })
}
