//! `sqlite://PATH`: locks shared by the processes of one host through one
//! SQLite file. The embedded default.
//!
//! One row per name in `lockward_locks` (name, owner, holder label, fence,
//! expiry). Rows are never deleted, so the fence counter survives release,
//! expiry and reopening the file; each fence is at least the wall clock in
//! µs, so a file restored from an older copy does not issue its fences
//! again. Every change runs in `BEGIN IMMEDIATE`,
//! which takes SQLite's write lock up front, so two processes can never both
//! see a lock as free. Expiry is measured on the host's boot clock
//! (`CLOCK_BOOTTIME`), which every process of the host shares and which
//! neither NTP nor an operator can move; after a reboot (a new boot id) every
//! lock is freed, since no holder survived it.
//!
//! SQLite cannot notify other processes, so waiters poll with jittered
//! backoff (1 → 50 ms), re-checking sooner when the holder's lease ends.
//! All SQLite calls run on the blocking thread pool, never on async threads.

pub(crate) mod doctor;
#[cfg(feature = "sqlite")]
mod host_clock;
#[cfg(feature = "sqlite")]
mod mutex;
#[cfg(feature = "sqlite")]
mod records;
pub mod url;
#[cfg(feature = "sqlite")]
pub use mutex::*;

pub use url::DEFAULT_SQLITE_PATH;
