//! Redlock's side client: the first master's, as a Redis server.

use super::url::RedlockUrl;
use crate::backend::redis::side::RedisSide;
use crate::error::{Error, Result};

/// A side client on the first master.
///
/// Cancellation: dropping the future drops the connection attempt.
pub async fn connect(url: &RedlockUrl) -> Result<RedisSide> {
    let first = url
        .masters
        .first()
        .ok_or_else(|| Error::invalid("url", "redlock:// needs masters"))?;
    RedisSide::connect(&url.master(first)).await
}
