//! `mysql://` (and `mariadb://`): locks in MySQL or MariaDB, in one of two
//! modes.
//!
//! **`mode=lease`** (the default): one row per name with its expiry on the
//! server's clock; see [`mutex`] for why one upsert takes a lock correctly
//! under InnoDB's locking.
//!
//! **`mode=named`**: the server's named locks (`GET_LOCK`), each on a
//! connection of its own; see [`named`].

#[cfg(feature = "mysql")]
mod baton;
#[cfg(feature = "mysql")]
pub(crate) mod core;
#[cfg(feature = "mysql")]
pub(crate) mod doctor;
#[cfg(feature = "mysql")]
pub mod mutex;
#[cfg(feature = "mysql")]
pub mod named;
#[cfg(feature = "mysql")]
mod open;
#[cfg(feature = "mysql")]
mod records;
#[cfg(feature = "mysql")]
mod sessions;
#[cfg(all(feature = "mysql", feature = "bench"))]
pub mod side;
pub mod url;
#[cfg(feature = "mysql")]
pub use mutex::{MysqlLeaseBackend, CAPABILITIES};
#[cfg(feature = "mysql")]
pub use open::connect;

pub use url::{MysqlMode, MysqlUrl, SslMode};
