//! The sentinels' `+switch-master` announcements, heard by a
//! `redis+sentinel://` connection: the moment the sentinels promote a new
//! primary, the connection stops trusting the one it uses. Needed for a
//! failover asked for by hand (`SENTINEL FAILOVER`, before maintenance):
//! the old primary stays up, and a writable primary in its own eyes, for
//! about ten seconds until the sentinels reconfigure it, and locks taken
//! there meanwhile are lost when it becomes a replica. A crashed primary
//! needs no announcement (its connection fails), and a missed one still
//! ends at the reconfiguration (`READONLY`, or the closed connection).

use std::time::Duration;

use futures_util::StreamExt;
use redis::RedisConnectionInfo;

use super::url::RedisUrl;

/// How long a silent subscription waits before it checks that its
/// connection is still in use.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// The pause before the next sentinel is tried after one failed.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Listens on one sentinel of `url` at a time (the next when it fails) for
/// the promotion of its primary, and tells `connection` the promoted
/// primary's address each time (`Some`), so it puts the one it uses in
/// doubt (see `sentinel.rs`); `None` only asks whether it is still in use.
/// Ends when `connection` answers `false`.
pub(super) async fn listen(url: RedisUrl, mut connection: impl FnMut(Option<&str>) -> bool) {
    let Some(sentinel) = url.sentinel.clone() else {
        return;
    };
    let mut next = 0;
    loop {
        if !connection(None) {
            return;
        }
        let endpoint = &url.endpoints[next % url.endpoints.len()];
        next += 1;
        let mut pubsub = match subscribe(&url, endpoint).await {
            Ok(pubsub) => pubsub,
            Err(e) => {
                tracing::debug!(sentinel = %endpoint, error = %e, "cannot hear +switch-master there");
                tokio::time::sleep(RETRY_AFTER).await;
                continue;
            }
        };
        let mut messages = pubsub.on_message();
        loop {
            match tokio::time::timeout(CHECK_EVERY, messages.next()).await {
                Ok(Some(message)) => {
                    let payload: String = message.get_payload().unwrap_or_default();
                    // "<name> <old ip> <old port> <new ip> <new port>"
                    let words: Vec<&str> = payload.split(' ').collect();
                    let [name, _, _, ip, port] = words[..] else {
                        continue;
                    };
                    if name != sentinel.primary {
                        continue;
                    }
                    tracing::info!(announcement = %payload, "the sentinels switched the primary");
                    if !connection(Some(&format!("{ip}:{port}"))) {
                        return;
                    }
                }
                // The sentinel went away: the next one.
                Ok(None) => break,
                Err(_) if !connection(None) => return,
                Err(_) => {}
            }
        }
    }
}

/// A subscription to `+switch-master` on the sentinel at `endpoint`, with
/// the sentinels' own credentials and the URL's TLS.
async fn subscribe(
    url: &RedisUrl,
    endpoint: &crate::url_parts::Endpoint,
) -> redis::RedisResult<redis::aio::PubSub> {
    let mut settings = RedisConnectionInfo::default();
    if let Some(sentinel) = &url.sentinel {
        if let Some(user) = &sentinel.user {
            settings = settings.set_username(user);
        }
        if let Some(password) = &sentinel.password {
            settings = settings.set_password(password.expose());
        }
    }
    let client = super::client::for_endpoint(url, endpoint, settings)?;
    let mut pubsub = tokio::time::timeout(Duration::from_secs(2), client.get_async_pubsub())
        .await
        .map_err(|_| {
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))
        })??;
    pubsub.subscribe("+switch-master").await?;
    Ok(pubsub)
}
