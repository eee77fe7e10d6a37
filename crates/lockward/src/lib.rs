//! # lockward
//!
//! Distributed locks that say where they stand: every acquisition returns a
//! fencing token, a conservative local deadline and a `lost()` signal, on
//! every backend behind one API.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use std::time::Duration;
//! use lockward::{LockOptions, Store};
//!
//! let store = Store::open("memory://").await?;
//! let opts = LockOptions::new().ttl(Duration::from_secs(5));
//! let guard = store.acquire("cron/cleanup", &opts).await?;
//! println!("fence {}", guard.fence());
//! guard.release().await?;
//! # Ok::<(), lockward::Error>(())
//! # }).unwrap();
//! ```
//!
//! Backends, each behind a cargo feature: `memory://` (always),
//! `sqlite://PATH` (`sqlite`, the embedded default), `redis://`,
//! `redis+cluster://` and `redlock://` (`redis`), `etcd://` (`etcd`),
//! `zk://` (`zookeeper`), `postgres://` (`postgres`), `mysql://`
//! (`mysql`) and `k8s://` (`kubernetes`); TLS to each server store with
//! its `-tls` feature (Kubernetes always speaks TLS). See [`StoreUrl`] for the URL forms and
//! [`Capabilities`] for what each store guarantees
//! (one table, checked against the stores' declarations). Each backend
//! implements the seams of [`backend`] in a folder of its own.
//!
//! Built on the lock: [`fence`] (resources that refuse stale tokens),
//! [`recipe::election`] (leader election with client-go's timing),
//! multi-locks ([`Store::acquire_all`]), [`recipe::RwLock`] (read-write
//! locks), [`recipe::Semaphore`], [`recipe::Idempotency`],
//! [`recipe::Optimistic`], rate limits ([`recipe::FixedWindow`],
//! [`recipe::Gcra`]) and, with the `cron` feature, `recipe::cron` (at most
//! one run per fire time, and no overlap unless allowed). A lease can hold
//! its name back after it lapses ([`LockOptions::lock_delay`]).

#![warn(missing_docs)]

pub mod backend;
pub mod doctor;
pub mod duration;
mod error;
pub mod fence;
mod finding;
mod forced;
mod guard;
mod lease;
mod local_line;
mod metrics;
mod name;
mod options;
mod owner;
pub mod recipe;
mod renewer;
mod store;
pub mod url;
mod url_parts;

pub use backend::Capabilities;
pub use error::{Cause, Error, LostReason, Result};
pub use guard::{Guard, LostSignal};
pub use lease::{local_deadline, Holding, Lease, LockInfo};
pub use name::{Name, MAX_NAME_BYTES};
pub use options::{LockOptions, Renewal, MAX_WAIT};
pub use owner::OwnerId;
pub use recipe::MultiGuard;
pub use store::Store;
pub use url::{StoreUrl, DEFAULT_SQLITE_PATH};
