//! Opens a `postgres://` store in the mode its URL names: lease rows or
//! advisory locks.

use super::advisory::PostgresAdvisoryBackend;
use super::lease::PostgresLeaseBackend;
use super::url::{PostgresMode, PostgresUrl};

/// Opens the backend the URL's mode names.
///
/// Cancellation: dropping the future drops the connection attempt; a table it
/// created stays.
pub async fn connect(
    url: &PostgresUrl,
) -> crate::error::Result<std::sync::Arc<dyn crate::backend::Backend>> {
    match url.mode {
        PostgresMode::Lease => Ok(std::sync::Arc::new(
            PostgresLeaseBackend::connect(url).await?,
        )),
        PostgresMode::Advisory => Ok(std::sync::Arc::new(
            PostgresAdvisoryBackend::connect(url).await?,
        )),
    }
}
