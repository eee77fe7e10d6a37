//! Opens a `mysql://` or `mariadb://` store in the mode its URL names:
//! lease rows or the server's named locks.

use super::mutex::MysqlLeaseBackend;
use super::named::MysqlNamedBackend;
use super::url::{MysqlMode, MysqlUrl};

/// Opens the backend the URL's mode names.
///
/// Cancellation: dropping the future gives up the connection.
pub async fn connect(
    url: &MysqlUrl,
) -> crate::error::Result<std::sync::Arc<dyn crate::backend::Backend>> {
    match url.mode {
        MysqlMode::Lease => Ok(std::sync::Arc::new(MysqlLeaseBackend::connect(url).await?)),
        MysqlMode::Named => Ok(std::sync::Arc::new(MysqlNamedBackend::connect(url).await?)),
    }
}
