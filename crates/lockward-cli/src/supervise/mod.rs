//! Supervising a command under a lock: `run`, `elect`, `once`, `cron` and
//! `sem` start their command here. The command runs in a tree of its own
//! under a keeper process (`keeper/`), which ends the tree by the lease's
//! local deadline even when lockward is frozen or killed; the tree is found
//! by its cgroup where the host allows (`cgroup.rs`, with `warden.rs`
//! cleaning up after a killed keeper), else by process descent
//! (`tree.rs`).

pub mod cgroup;
mod command;
pub mod keeper;
pub mod tree;
pub mod warden;

pub use command::{finish, never, run_and_release, run_under, run_while, Ended};
