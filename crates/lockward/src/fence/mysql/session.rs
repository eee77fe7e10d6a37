//! How a MySQL or MariaDB session tells the guard which fences it writes
//! with: the user variable `@lockward_fences` (`a=5,b=7`), or
//! `@lockward_lock` and `@lockward_fence` for one lock.

use crate::fence::pairs::fences_value;

/// The statement that makes a session write with `fences`: for a client's
/// init command (`mysql --init-command`, go-sql-driver's DSN parameter
/// `@lockward_fences`, Connector/J's `sessionVariables`, PyMySQL's
/// `init_command`), or run first in each transaction on a pooled
/// connection. The value needs no escaping in any SQL mode.
///
/// ```
/// use lockward::fence::mysql::init_command;
/// assert_eq!(init_command(&[("migrate", 42)]), "SET @lockward_fences = 'migrate=42'");
/// assert_eq!(
///     init_command(&[("it's", 7), ("a,b", 9)]),
///     "SET @lockward_fences = 'it%27s=7,a%2Cb=9'"
/// );
/// ```
pub fn init_command(fences: &[(&str, u64)]) -> String {
    format!("SET @lockward_fences = '{}'", fences_value(fences))
}
