//! How a session tells the guard which fence it writes with: the settings
//! `lockward.lock` and `lockward.fence` (one lock), or `lockward.fences`
//! (`a=5,b=7`, several), as startup options or per transaction.

use crate::fence::pairs::fences_value;

/// The startup options (for `PGOPTIONS`, or `options=` in a connection
/// string) that make every transaction of a session write with `fences`,
/// escaped as libpq reads them (a backslash before a space or backslash).
///
/// ```
/// use lockward::fence::postgres::session_options;
/// assert_eq!(session_options(&[("migrate", 42)]), "-c lockward.fences=migrate=42");
/// assert_eq!(
///     session_options(&[("daily report", 7), ("a,b", 9)]),
///     r"-c lockward.fences=daily\ report=7,a%2Cb=9"
/// );
/// ```
pub fn session_options(fences: &[(&str, u64)]) -> String {
    let value = fences_value(fences)
        .replace('\\', "\\\\")
        .replace(' ', "\\ ");
    format!("-c lockward.fences={value}")
}

/// The statement, and its one parameter, that makes the rest of the
/// current transaction write with `fences`: for a pooled connection, whose
/// startup options a pooler drops. Run it first in each transaction.
///
/// ```
/// use lockward::fence::postgres::set_fences_statement;
/// let (sql, value) = set_fences_statement(&[("migrate", 42)]);
/// assert_eq!(sql, "SELECT set_config('lockward.fences', $1, true)");
/// assert_eq!(value, "migrate=42");
/// ```
pub fn set_fences_statement(fences: &[(&str, u64)]) -> (&'static str, String) {
    (
        "SELECT set_config('lockward.fences', $1, true)",
        fences_value(fences),
    )
}
