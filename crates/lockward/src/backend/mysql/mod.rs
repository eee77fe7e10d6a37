//! `mysql://` (and `mariadb://`): locks in MySQL or MariaDB, one row per
//! name with its expiry on the server's clock; see [`mutex`] for why one
//! upsert takes a lock correctly under InnoDB's locking.

#[cfg(feature = "mysql")]
pub(crate) mod conn;
#[cfg(feature = "mysql")]
pub(crate) mod doctor;
#[cfg(feature = "mysql")]
pub mod mutex;
#[cfg(feature = "mysql")]
mod records;
#[cfg(feature = "mysql")]
pub mod side;
pub mod url;
#[cfg(feature = "mysql")]
pub use mutex::{MysqlBackend, CAPABILITIES};

pub use url::MysqlUrl;
