//! Grants confirmed by replicas (`replicas=N`): after a script grants or
//! renews, `WAIT N timeout` on the same connection says how many replicas
//! have every write the connection made; fewer than N and the grant is
//! undone (a renewal is reported failed, so the holder's deadline stays
//! where the last confirmed renewal put it).
//!
//! What it buys: an acknowledged grant survives the loss of the primary
//! when a confirmed replica is promoted. What it does not: it is not
//! consensus (a failover may still promote a replica that was not among
//! the N), and a grant that is undone may have reached a replica.

use super::core::RedisBackend;
use crate::error::{Error, Result};

impl RedisBackend {
    /// Waits until the URL's replicas confirm this connection's writes so
    /// far; `what` names the write for the error ("the grant of NAME").
    /// `Ok` at once without `replicas=`.
    ///
    /// Cancellation: dropping the future leaves the write in place (a
    /// grant then runs out at its TTL, as one whose reply was lost).
    pub(super) async fn confirm_replicated(&self, what: &str) -> Result<()> {
        let Some(replicas) = self.replicas else {
            return Ok(());
        };
        let timeout_ms = u64::try_from(replicas.timeout.as_millis()).unwrap_or(u64::MAX);
        let confirmed: i64 = redis::cmd("WAIT")
            .arg(replicas.count)
            .arg(timeout_ms)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.unavailable(e))?;
        if confirmed >= i64::from(replicas.count) {
            return Ok(());
        }
        Err(Error::Unavailable {
            address: self.address.clone(),
            message: format!(
                "{confirmed} of the {} replicas asked for confirmed {what} within {:?}",
                replicas.count, replicas.timeout
            ),
            cause: None,
        })
    }
}
