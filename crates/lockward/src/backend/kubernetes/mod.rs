//! `k8s://`: locks as `coordination.k8s.io/v1` Leases, one per name, by
//! the rules of client-go's leader election (`tools/leaderelection` with a
//! `LeaseLock`), so `lockward elect` and a Go controller on the same Lease
//! exclude each other both ways.
//!
//! - **The Lease** holds client-go's record: `holderIdentity` (lockward's
//!   is `LABEL_OWNER`, see `lease_record.rs`), `leaseDurationSeconds` (the TTL in
//!   whole seconds, rounded up), `acquireTime`, `renewTime` and
//!   `leaseTransitions`. Names map to Lease names by [`names`].
//! - **Expiry is observed, not computed**: a holder's lease has expired
//!   when its record has not changed for `leaseDurationSeconds` as this
//!   process's clock measures from when it first saw that record. No
//!   host's clock is compared with `renewTime`, so clock skew between hosts
//!   does not matter; a process that has just started waits a whole
//!   duration before it takes a Lease someone holds.
//! - **Acquire** reads the Lease and, when it is free (no holder, as
//!   client-go's release leaves it) or expired, updates it on the
//!   `resourceVersion` read; a conflict means another candidate won. A
//!   missing Lease is created.
//! - **Fences** are `resourceVersion`s, which are etcd revisions: global
//!   and only growing. The fence is the version the taking update was
//!   conditioned on (for a new Lease, the revision of a list read just
//!   before), so it is larger than every earlier holder's fence, also
//!   after the Lease was deleted. It is written into the Lease with the
//!   holder (annotation `lockward.dev/fence`), for `status`.
//! - **Waiting** watches the one Lease and re-checks at every event and
//!   when the holder would expire. Not FIFO: whoever writes first wins.
//! - **Records** are ConfigMaps (see `records.rs`).

#[cfg(feature = "kubernetes")]
mod core;
#[cfg(feature = "kubernetes")]
pub(crate) mod doctor;
#[cfg(feature = "kubernetes")]
mod lease;
#[cfg(feature = "kubernetes")]
mod lease_record;
pub mod names;
#[cfg(feature = "kubernetes")]
mod observed;
#[cfg(feature = "kubernetes")]
mod records;
#[cfg(all(feature = "kubernetes", feature = "bench"))]
pub mod side;
pub mod url;
#[cfg(feature = "kubernetes")]
mod watch;

#[cfg(feature = "kubernetes")]
pub use core::{KubernetesBackend, CAPABILITIES};
pub use url::KubernetesUrl;
