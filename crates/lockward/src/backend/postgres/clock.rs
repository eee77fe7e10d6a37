//! The server's clock in µs, in SQL: the floor of every fence and version
//! PostgreSQL grants (docs/fences.md), for the statements of both modes
//! and the semaphores' schema.

/// The server's clock in µs, in SQL: the least fence a grant takes. A
/// name's row alone is not enough: one that came back older than the
/// fences already granted (a standby promoted before it had the last
/// commits, a restore from a backup) would hand out those fences again;
/// the clock is ahead of them as long as the promoted server's clock is
/// not behind the lost one's by more than the time from the last lost
/// grant to this one. Below 2^53 for centuries.
pub(super) const CLOCK_FENCE: &str = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";
