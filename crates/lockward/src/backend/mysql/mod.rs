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
mod records;
#[cfg(feature = "mysql")]
mod sessions;
#[cfg(all(feature = "mysql", feature = "bench"))]
pub mod side;
pub mod url;
#[cfg(feature = "mysql")]
pub use mutex::{MysqlBackend, CAPABILITIES};

pub use url::{MysqlMode, MysqlUrl, SslMode};

/// Opens the backend the URL's mode names.
///
/// Cancellation: dropping the future gives up the connection.
#[cfg(feature = "mysql")]
pub async fn connect(
    url: &MysqlUrl,
) -> crate::error::Result<std::sync::Arc<dyn crate::backend::Backend>> {
    match url.mode {
        MysqlMode::Lease => Ok(std::sync::Arc::new(MysqlBackend::connect(url).await?)),
        MysqlMode::Named => Ok(std::sync::Arc::new(
            named::NamedBackend::connect(url).await?,
        )),
    }
}
