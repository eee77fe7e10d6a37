//! `etcd://`: locks on an etcd v3 cluster, in the layout of Go's
//! `concurrency.Mutex` (see [`keys`]), so `etcdctl lock` and lockward
//! exclude each other.
//!
//! - **Leases, one per guard.** Each acquisition grants its own lease and
//!   attaches its contender key to it. A per-guard lease keeps each lock's
//!   TTL its own, lets one lock be lost without taking the others down, and
//!   makes release one `LeaseRevoke` that deletes the key atomically. etcd
//!   leases count whole seconds, so the server keeps a key for
//!   ⌈TTL⌉ s (at least 1 s): never shorter than asked, and the holder's local
//!   deadline still counts from the TTL asked for.
//! - **Acquire**: put the key `if create_revision == 0`, then the holder is
//!   the key with the lowest create revision under the name's prefix. The
//!   fence is our key's create revision: revisions are global and only
//!   grow, so every later key of the name has a larger one.
//! - **Waiting is FIFO**: a waiter watches only the key created just before
//!   its own (no herd) and re-checks when it is deleted. Its lease is kept
//!   alive while it waits.
//! - **Loss**: renewal is a keep-alive plus a check that our key still
//!   exists on our lease; a lease that is gone (TTL 0), a deleted key or
//!   one moved to another lease (a forced unlock that holds the name back,
//!   see `forced.rs`) is loss.
//! - **Elections**: Go's `concurrency.Election` uses the same layout, with
//!   the candidate's proposal as the value. A lock taken with a label stores
//!   the label alone as its value, so a lockward candidate and
//!   `etcdctl elect lockward/NAME PROPOSAL` compete for one leadership, and
//!   `etcdctl elect -l lockward/NAME` prints lockward's identity. (A holder
//!   with a lock-delay stores its owner id instead, whose mark tells a
//!   forced unlock from elsewhere to hold the name back.)
//!
//! - **Read-write locks** are native: a key per reader on its own lease
//!   beside the writers' line, ordered with it by create revision (see
//!   `readers.rs`).
//! - **Semaphores** are kept natively: a key per holder on its lease and a
//!   count beside them (see `permits.rs`).
//!
//! Every call opens its own stream (keep-alive, watch), so nothing is left
//! to restore after a server restart or a failover: the next call reconnects.
//! The store keeps one client per member and moves to the next member when
//! one stops answering (tonic's balancer keeps routing to a dead member);
//! members without a leader refuse calls rather than serve stale reads.

#[cfg(feature = "etcd")]
mod conn;
#[cfg(feature = "etcd")]
mod core;
#[cfg(feature = "etcd")]
pub(crate) mod doctor;
#[cfg(feature = "etcd")]
mod forced;
#[cfg(feature = "etcd")]
pub mod keys;
#[cfg(feature = "etcd")]
mod mutex;
#[cfg(feature = "etcd")]
mod permits;
#[cfg(feature = "etcd")]
mod queue;
#[cfg(feature = "etcd")]
mod readers;
#[cfg(feature = "etcd")]
mod records;
#[cfg(all(feature = "etcd", feature = "bench"))]
pub mod side;
pub mod url;
#[cfg(feature = "etcd")]
pub(crate) use conn::side_client;
#[cfg(feature = "etcd")]
pub use core::{EtcdBackend, CAPABILITIES};

pub use url::EtcdUrl;
