//! `postgres://`: locks in PostgreSQL, in one of two modes.
//!
//! **`mode=lease`** (the default): one row per held name in the lock table
//! (name, owner, holder, fence, expiry). One statement takes a free or
//! expired row, the classic `INSERT … ON CONFLICT DO NOTHING` made safe:
//! `ON CONFLICT (name) DO UPDATE … WHERE expires_at <= clock_timestamp()`.
//! Expiry is the server's clock, so client clocks do not matter. The fence
//! comes from a sequence, drawn in the `SET` clause, i.e. after the row lock:
//! drawn earlier, a contender that waited on the row could win later with a
//! smaller token. Release frees the row in place if the owner matches
//! (owner cleared, expired now): an update the server keeps on the row's
//! page, where a delete and a new insert per holder would leave a version
//! per handoff for every lookup to step over while waiting statements hold
//! old snapshots. Waiters
//! take turns through a baton per name, a session advisory lock the
//! server's lock manager hands to one waiter at a time (see `baton.rs`).
//!
//! Semaphores are kept natively in lease mode: a row per holder and a
//! count per semaphore (see `permits.rs`).
//!
//! **`mode=advisory`**: session advisory locks; see [`advisory`].

#[cfg(feature = "postgres")]
pub mod advisory;
#[cfg(feature = "postgres")]
mod baton;
#[cfg(feature = "postgres")]
mod clock;
#[cfg(feature = "postgres")]
pub(crate) mod core;
#[cfg(feature = "postgres")]
pub(crate) mod doctor;
#[cfg(feature = "postgres")]
mod lease;
#[cfg(feature = "postgres")]
mod listen;
#[cfg(feature = "postgres")]
mod open;
#[cfg(feature = "postgres")]
mod permit_sql;
#[cfg(feature = "postgres")]
mod permits;
#[cfg(feature = "postgres")]
mod records;
#[cfg(feature = "postgres")]
mod sessions;
#[cfg(all(feature = "postgres", feature = "bench"))]
pub mod side;
#[cfg(feature = "postgres")]
mod statements;
pub mod url;
#[cfg(feature = "postgres")]
pub use lease::{PostgresLeaseBackend, CAPABILITIES};
#[cfg(feature = "postgres")]
pub use open::connect;

pub use url::{PostgresMode, PostgresUrl};
