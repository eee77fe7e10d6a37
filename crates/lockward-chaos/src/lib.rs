//! lockward's chaos harness: client processes read-modify-write a shared
//! register under a lock (fenced, also through `lockward serve`, unfenced
//! as a positive control, and as an elected leader), readers and writers share a read-write lock,
//! instances of a cron job forbid overlapping executions, and more holders
//! than permits share a semaphore, `lockward run --fence-db` commands
//! write with `psql` to a table the database guards,
//! while the harness pauses clients past their TTL,
//! kills and restarts servers, cuts connections through its own TCP proxy
//! and jumps server clocks; a checker then judges the history.
//!
//! `lockward-chaos --backend NAME [--duration D] [--seed N] [--json]`.

pub mod checker;
pub mod client;
pub mod cron_check;
pub mod cron_client;
pub mod forced;
pub mod guarded_check;
pub mod guarded_client;
pub mod history;
pub mod proxy;
pub mod register;
pub mod report;
pub mod run;
pub mod rw_check;
pub mod rw_client;
pub mod sem_check;
pub mod sem_client;
pub mod served_client;
pub mod target;
pub mod workload;
