//! `redlock://`: one lock over N independent Redis masters, granted by a
//! majority, with fencing tokens that stay monotonic.
//!
//! - **Acquire** on every master in parallel, each with a short per-node
//!   timeout; granted when a majority accepted and the time spent is below
//!   TTL − drift (drift = TTL/100 + 2 ms); the holder's local deadline is
//!   request start + TTL − drift, i.e. validity = TTL − elapsed − drift from
//!   now. On failure, release on every master and retry with jitter.
//! - **Extend** on every master; kept while a majority accepts.
//! - **Waiting** in line: see below.
//!
//! # The line of waiters, and its quorum rule
//!
//! Each master keeps a line per name (the Redis backend's layout). A waiter
//! joins every master's line under one *ticket*, its own clock when it
//! started waiting (ties broken by owner id), so every master orders the
//! same waiters alike. A master grants only to the first live place of its
//! line, or to anyone when nobody queues there; the lock is granted, as
//! always, when a majority granted. A release publishes the next in line on
//! every master, which wakes that waiter only.
//!
//! Two waiters can never both win: each needs a majority. The first in
//! line by ticket wins as soon as a majority of masters hold its place
//! (a master restarted without persistence lost its line; its first may
//! differ until the waiters renew their places there). Places are leased,
//! so a killed waiter blocks nobody for longer than its place lease, and a
//! waiter that gives up leaves every line at once. Clock skew between
//! waiters' hosts only bends the order, never the exclusion.
//!
//! # Why the fences are monotonic
//!
//! Redlock alone issues no tokens, so acquisition takes two rounds:
//!
//! 1. Each master that grants the lock (`SET NX PX`) also returns its
//!    *reading*: `max(counter, its clock in µs)`.
//! 2. The token is `T = max(readings of the granting majority) + 1`. Each
//!    granting master raises its counter to `T`, but only if this owner
//!    still holds the lock there. The acquisition counts only when a
//!    majority accepted the raise, within the validity time.
//!
//! Take an acquisition A with token `T_A`, counted at moment `g_A`, and a
//! later acquisition B that is granted while or after A's majority `R_A`
//! raised. B's round one needs a majority `G_B`; two majorities of N share
//! at least one master `m`. On `m`, A held the lock when it raised, and B
//! could only take it once A's key there was gone, so B's reading on `m`
//! comes after A's raise and is at least `T_A`. Hence `T_B ≥ T_A + 1`.
//!
//! The argument needs `m` to remember its counter. A master restarted
//! without persistence forgets it; its reading then falls back on its clock,
//! which exceeds every token issued before as long as masters' clocks agree
//! to within the time since (tokens track the clock, plus one per grant). So
//! fences stay monotonic with persistence on a majority, or with clocks
//! that do not jump back. The chaos tests restart a minority without
//! persistence to check it, and the model
//! `crates/lockward-models/src/redlock.rs` checks the argument over every
//! interleaving within its bounds (docs/models.md): with a master's restart
//! quicker than the masters' clocks are apart, it finds a token granted
//! twice.

#[cfg(feature = "redis")]
pub(crate) mod doctor;
#[cfg(feature = "redis")]
mod line;
#[cfg(feature = "redis")]
mod mutex;
#[cfg(feature = "redis")]
mod quorum;
#[cfg(feature = "redis")]
mod records;
#[cfg(feature = "redis")]
#[cfg(all(feature = "redis", feature = "bench"))]
pub mod side;
pub mod url;
#[cfg(feature = "redis")]
mod wakeup;
#[cfg(feature = "redis")]
pub use mutex::*;

pub use url::RedlockUrl;
