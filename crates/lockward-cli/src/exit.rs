//! lockward's exit statuses, and how errors map to them.

use lockward::Error;

/// Bad arguments: an invalid name, TTL, duration or URL.
pub const USAGE: u8 = 64;
/// The store could not be reached.
pub const UNAVAILABLE: u8 = 69;
/// The store refused lockward's credentials or permissions.
pub const DENIED: u8 = 77;
/// An internal error or an unexpected reply from the store; also the
/// command's keeper killed (its tree ended before the lock was released).
pub const SOFTWARE: u8 = 70;
/// The lock could not be had (`--no-wait`, or the wait ran out).
pub const NOT_ACQUIRED: u8 = 75;
/// The lock was lost while CMD ran; CMD was terminated.
pub const LOST: u8 = 76;
/// CMD exists but could not be executed.
pub const CANNOT_EXECUTE: u8 = 126;
/// CMD was not found.
pub const NOT_FOUND: u8 = 127;

/// The text for `--help` (and the table in docs/cli.md).
pub const TABLE: &str = "\
Exit status:
  the command's own    when it ran (128+N when it was killed by signal N)
  64                   bad arguments (name, TTL, duration, URL), or asked of a store that cannot
  69                   the store could not be reached
  70                   internal error or unexpected reply from the store, or the command's
                       keeper was killed (its tree was ended before the lock was released)
  75                   the lock could not be had (--no-wait, or --wait ran out)
  76                   the lock was lost while the command ran; it was terminated
  77                   the store refused lockward's credentials or permissions
  126                  the command could not be executed
  127                  the command was not found";

/// The exit status for a lockward error.
pub fn for_error(e: &Error) -> u8 {
    match e {
        Error::Busy { .. }
        | Error::NoPermits { .. }
        | Error::TimedOut { .. }
        | Error::Contended { .. } => NOT_ACQUIRED,
        Error::Lost { .. } => LOST,
        Error::InvalidArgument { .. } | Error::NotBuilt { .. } | Error::NotSupported { .. } => {
            USAGE
        }
        Error::Unavailable { .. } => UNAVAILABLE,
        Error::Denied { .. } => DENIED,
        _ => SOFTWARE,
    }
}
