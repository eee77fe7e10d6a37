//! The workloads a client process can run, and the lease every one takes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lockward::fence::{FencedResource, SqliteRegister};

use crate::register::PlainRegister;

/// The lease every workload takes.
pub const TTL: Duration = Duration::from_secs(1);

/// What a client does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Lock, and write through the fenced register.
    Fenced,
    /// As [`Fenced`](Workload::Fenced), on the same lock and register, but
    /// locking through `lockward serve` (see [`crate::served_client`]).
    Served,
    /// Lock, and write through a register that ignores fences (the
    /// positive control).
    Unfenced,
    /// Lock, and write through the fence-ignoring register while judged as
    /// fenced (the mutant).
    Mutant,
    /// Leader election; the leader writes with its epoch.
    Election,
    /// The write side of a read-write lock (see [`crate::rw_client`]).
    RwWriter,
    /// The read side of a read-write lock.
    RwReader,
    /// An instance of a cron job that forbids overlap (see
    /// [`crate::cron_client`]).
    Cron,
    /// A holder of a semaphore with fewer permits than holders (see
    /// [`crate::sem_client`]).
    Semaphore,
    /// `lockward run --fence-db` around `psql` writes to a table the
    /// database guards (see [`crate::guarded_client`]).
    Guarded,
}

impl Workload {
    /// Its name on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Fenced => "fenced",
            Workload::Served => "served",
            Workload::Unfenced => "unfenced",
            Workload::Mutant => "mutant",
            Workload::Election => "election",
            Workload::RwWriter => "rw-writer",
            Workload::RwReader => "rw-reader",
            Workload::Cron => "cron",
            Workload::Semaphore => "semaphore",
            Workload::Guarded => "guarded",
        }
    }

    /// From its name.
    pub fn parse(text: &str) -> Option<Workload> {
        [
            Workload::Fenced,
            Workload::Served,
            Workload::Unfenced,
            Workload::Mutant,
            Workload::Election,
            Workload::RwWriter,
            Workload::RwReader,
            Workload::Cron,
            Workload::Semaphore,
            Workload::Guarded,
        ]
        .into_iter()
        .find(|w| w.name() == text)
    }

    /// The lock it takes (`chaos-KEY`) and the register key it writes:
    /// served clients share the fenced clients'.
    pub fn key(self) -> &'static str {
        match self {
            Workload::Served => Workload::Fenced.name(),
            other => other.name(),
        }
    }

    /// The register this workload writes.
    pub async fn register(self, dir: &Path) -> lockward::Result<Arc<dyn FencedResource>> {
        Ok(match self {
            Workload::Fenced
            | Workload::Served
            | Workload::Election
            | Workload::RwWriter
            | Workload::RwReader => {
                Arc::new(SqliteRegister::open(&dir.join("registers.db"), "registers").await?)
            }
            // Cron, Semaphore and Guarded write none; a plain one costs
            // nothing.
            Workload::Unfenced
            | Workload::Mutant
            | Workload::Cron
            | Workload::Semaphore
            | Workload::Guarded => Arc::new(PlainRegister::new(dir)),
        })
    }
}
