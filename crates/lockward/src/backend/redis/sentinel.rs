//! The connection of a `redis+sentinel://` store: the primary the
//! sentinels name, found again when it changes.
//!
//! The sentinels are asked for the primary when the store connects (and
//! the primary must confirm with `ROLE`, as Sentinel's guidelines for
//! clients ask), then again whenever a command finds it gone (its
//! connection dropped, refused or timed out) or demoted (a `READONLY`
//! reply); the command is then sent once more, to the new primary. A
//! failover shows up as one of those: the old primary is dead, or a
//! replica now, and Sentinel closes clients' connections when it
//! reconfigures a server. Until the sentinels name a primary again, every
//! command asks them first: the managed connection may meanwhile have
//! reconnected by itself to the old primary restarted empty, a primary in
//! its own eyes until the sentinels make it a replica (the chaos harness
//! found locks taken there). The sentinels' `+switch-master`
//! announcement puts the primary in doubt too (see `switch_master.rs`):
//! in a failover asked for by hand the old primary stays writable for
//! seconds. A connection that carries subscriptions
//! subscribes its channels again on the new primary, and its waiters are
//! told to look again, since a release may have been published meanwhile.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use redis::aio::{AsyncPushSender, ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    Cmd, ConnectionAddr, Pipeline, ProtocolVersion, PushInfo, PushKind, RedisResult, Value,
};

use super::url::RedisUrl;

/// The primary in use and how many times it was found.
#[derive(Clone)]
struct Primary {
    address: String,
    manager: ConnectionManager,
    found: u64,
}

/// A managed connection to the primary Sentinel names.
pub struct SentinelConn {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    config: ConnectionManagerConfig,
    current: RwLock<Primary>,
    /// One lookup at a time: callers that found the same primary gone share
    /// the next one's result.
    finding: tokio::sync::Mutex<()>,
    /// Set when the primary in use was found gone, until the sentinels
    /// named one again.
    suspect: AtomicBool,
    /// The channels subscribed on this connection, to subscribe again on a
    /// new primary.
    subscribed: Mutex<BTreeSet<Vec<u8>>>,
    push: Option<Arc<dyn AsyncPushSender>>,
    /// Told when the connection to the primary dropped (subscribing
    /// connections only, which send too little to notice by themselves).
    lost: Arc<tokio::sync::Notify>,
    subscribes: bool,
    db: i64,
}

impl Drop for SentinelConn {
    fn drop(&mut self) {
        // Ends the task that follows a subscribing connection's primary.
        self.lost.notify_one();
    }
}

/// How often a subscribing connection that lost its primary asks the
/// sentinels again, and for how long.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_millis(250);
const LOOK_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// Follows a subscribing connection's primary after its connection
/// dropped: until the sentinels name a primary that answers as one, the
/// same or another (a failover takes seconds). Ends with the connection.
async fn follow_when_lost(conn: Weak<SentinelConn>, lost: Arc<tokio::sync::Notify>) {
    loop {
        lost.notified().await;
        let until = tokio::time::Instant::now() + LOOK_FOR;
        while tokio::time::Instant::now() < until {
            let Some(this) = conn.upgrade() else { return };
            let primary = this.primary();
            // Found when the sentinels name a primary that says it is one:
            // this one back (a restart), or another (a failover).
            let found = this.follow(&primary).await.is_ok();
            drop(this);
            if found {
                break;
            }
            tokio::time::sleep(LOOK_AGAIN).await;
        }
        if conn.strong_count() == 0 {
            return;
        }
    }
}

/// Whether `e` says the primary is gone or no longer the primary.
fn primary_gone(e: &redis::RedisError) -> bool {
    e.is_connection_dropped()
        || e.is_io_error()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.code() == Some("READONLY")
}

impl SentinelConn {
    /// Asks the sentinels of `url` for its primary and connects to it with
    /// `config` (timeouts, retries). With `push`, the connection speaks
    /// RESP3, hands pushed messages to it and keeps its subscriptions
    /// across reconnects and failovers: when it loses its primary, it asks
    /// the sentinels until they name one that answers.
    ///
    /// Cancellation: dropping the future drops the attempt.
    pub async fn connect(
        url: &RedisUrl,
        config: ConnectionManagerConfig,
        push: Option<Box<dyn AsyncPushSender>>,
    ) -> RedisResult<Arc<SentinelConn>> {
        let protocol = if push.is_some() {
            ProtocolVersion::RESP3
        } else {
            ProtocolVersion::RESP2
        };
        let lost = Arc::new(tokio::sync::Notify::new());
        let push: Option<Arc<dyn AsyncPushSender>> = push.map(Arc::from);
        let config = match &push {
            Some(inner) => {
                let (inner, lost) = (inner.clone(), lost.clone());
                config
                    .set_push_sender(move |info: PushInfo| {
                        if info.kind == PushKind::Disconnection {
                            lost.notify_one();
                        }
                        inner.send(info)
                    })
                    .set_automatic_resubscription()
            }
            None => config,
        };
        let sentinel = url.sentinel.as_ref().ok_or_else(|| {
            redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "not a redis+sentinel:// URL",
            ))
        })?;
        let addrs = url.endpoints.iter().map(|e| {
            if url.tls {
                ConnectionAddr::TcpTls {
                    host: e.host.clone(),
                    port: e.port,
                    insecure: false,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(e.host.clone(), e.port)
            }
        });
        let mut builder =
            SentinelClientBuilder::new(addrs, &sentinel.primary, SentinelServerType::Master)?
                .set_client_to_redis_db(i64::from(url.db))
                .set_client_to_redis_protocol(protocol);
        if let Some(user) = &url.user {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(password) = &url.password {
            builder = builder.set_client_to_redis_password(password.expose());
        }
        if let Some(user) = &sentinel.user {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = &sentinel.password {
            builder = builder.set_client_to_sentinel_password(password.expose());
        }
        #[cfg(feature = "redis-tls")]
        if url.tls {
            let certificates = super::tls::certificates(url)?;
            builder = builder
                .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
                .set_client_to_redis_certificates(certificates.clone())
                .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure)
                .set_client_to_sentinel_certificates(certificates);
        }
        let mut sentinels = builder.build()?;
        let client = sentinels.async_get_client().await?;
        let address = client.get_connection_info().addr().to_string();
        let manager = ConnectionManager::new_with_config(client, config.clone()).await?;
        let conn = Arc::new(SentinelConn {
            sentinels: tokio::sync::Mutex::new(sentinels),
            config,
            current: RwLock::new(Primary {
                address,
                manager,
                found: 1,
            }),
            finding: tokio::sync::Mutex::new(()),
            suspect: AtomicBool::new(false),
            subscribed: Mutex::new(BTreeSet::new()),
            lost: lost.clone(),
            subscribes: push.is_some(),
            push,
            db: i64::from(url.db),
        });
        if conn.subscribes {
            tokio::spawn(follow_when_lost(Arc::downgrade(&conn), lost));
        }
        let heard = Arc::downgrade(&conn);
        tokio::spawn(super::switch_master::listen(url.clone(), move |promoted| {
            let Some(conn) = heard.upgrade() else {
                return false;
            };
            if let Some(address) = promoted {
                conn.primary_switched(address);
            }
            true
        }));
        Ok(conn)
    }

    /// The sentinels announced `promoted` as the new primary
    /// (`+switch-master`): unless that is the one in use already (the
    /// connection followed a failed command there first), it is in doubt
    /// until they are asked again, which the next command does first; a
    /// subscribing connection, which may send nothing for long, follows at
    /// once. (A lookup the connection does not need is not harmless: a
    /// sentinel that has not heard of the switch yet may name the old
    /// primary, restarted empty and calling itself one.)
    fn primary_switched(&self, promoted: &str) {
        if self.primary().address == promoted {
            return;
        }
        self.suspect.store(true, Ordering::SeqCst);
        if self.subscribes {
            self.lost.notify_one();
        }
    }

    fn primary(&self) -> Primary {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Asks the sentinels again after `gone` (as found then) failed; the
    /// primary to use now, which the sentinels name and which says it is
    /// the primary. The same one when they still name it and it answers
    /// (its managed connection reconnected by itself). Until a lookup
    /// succeeds, every command first looks again: the managed connection
    /// may meanwhile have reconnected to the old primary restarted empty,
    /// which calls itself a primary until the sentinels make it a replica,
    /// and locks taken there would be nobody else's.
    ///
    /// Cancellation: dropping the future leaves the primary as it was, or
    /// the new one in place.
    async fn follow(&self, gone: &Primary) -> RedisResult<Primary> {
        // In doubt at once, so that no command goes to it unchecked
        // meanwhile.
        self.suspect.store(true, Ordering::SeqCst);
        let _one = self.finding.lock().await;
        let now = self.primary();
        if now.found != gone.found {
            // Another caller found this one meanwhile (the next command
            // checks it once more).
            return Ok(now);
        }
        // Names the primary and checks its ROLE.
        let client = self.sentinels.lock().await.async_get_client().await?;
        let address = client.get_connection_info().addr().to_string();
        if address == now.address {
            self.suspect.store(false, Ordering::SeqCst);
            return Ok(now);
        }
        let mut manager = ConnectionManager::new_with_config(client, self.config.clone()).await?;
        let channels: Vec<Vec<u8>> = self
            .subscribed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect();
        for channel in &channels {
            manager.subscribe(channel).await?;
        }
        tracing::info!(from = %now.address, to = %address, "Sentinel named a new primary");
        let next = Primary {
            address,
            manager,
            found: now.found + 1,
        };
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = next.clone();
        self.suspect.store(false, Ordering::SeqCst);
        // Releases published while the old primary went away reached
        // nobody here: every waiter looks again.
        if let Some(push) = &self.push {
            let _ = push.send(PushInfo {
                kind: PushKind::Disconnection,
                data: Vec::new(),
            });
        }
        Ok(next)
    }

    /// The primary to send to: the one in use, looked up again first while
    /// it is in doubt (see [`follow`](Self::follow)).
    async fn trusted(&self) -> RedisResult<Primary> {
        let primary = self.primary();
        if self.suspect.load(Ordering::SeqCst) {
            return self.follow(&primary).await;
        }
        Ok(primary)
    }

    /// Sends `cmd` to the primary, once more to a new one if the primary
    /// was gone.
    async fn request(&self, cmd: &Cmd) -> RedisResult<Value> {
        let primary = self.trusted().await?;
        match primary.manager.clone().send_packed_command(cmd).await {
            Err(e) if primary_gone(&e) => {
                let next = self.follow(&primary).await?;
                next.manager.clone().send_packed_command(cmd).await
            }
            other => other,
        }
    }

    async fn request_all(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let primary = self.trusted().await?;
        let mut manager = primary.manager.clone();
        match manager.send_packed_commands(pipeline, offset, count).await {
            Err(e) if primary_gone(&e) => {
                let next = self.follow(&primary).await?;
                let mut manager = next.manager.clone();
                manager.send_packed_commands(pipeline, offset, count).await
            }
            other => other,
        }
    }

    /// SUBSCRIBE on the primary, kept across failovers.
    ///
    /// Cancellation: the channel counts as subscribed; it is subscribed on
    /// the next primary in any case.
    pub async fn subscribe(&self, channel: &[u8]) -> RedisResult<()> {
        self.subscribed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(channel.to_vec());
        let primary = self.trusted().await?;
        match primary.manager.clone().subscribe(channel).await {
            Err(e) if primary_gone(&e) => {
                self.follow(&primary)
                    .await?
                    .manager
                    .subscribe(channel)
                    .await
            }
            other => other,
        }
    }

    /// UNSUBSCRIBE on the primary.
    ///
    /// Cancellation: an extra message on the channel wakes nobody.
    pub async fn unsubscribe(&self, channel: &[u8]) -> RedisResult<()> {
        self.subscribed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(channel);
        self.primary().manager.unsubscribe(channel).await
    }

    /// The managed connection to the primary in use now.
    pub fn manager(&self) -> ConnectionManager {
        self.primary().manager
    }
}

/// A `redis+sentinel://` store's handle on its [`SentinelConn`], cheap to
/// clone, usable where redis-rs wants a connection.
#[derive(Clone)]
pub struct Followed(pub Arc<SentinelConn>);

impl ConnectionLike for Followed {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> redis::RedisFuture<'a, Value> {
        Box::pin(async move { self.0.request(cmd).await })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        Box::pin(async move { self.0.request_all(pipeline, offset, count).await })
    }

    fn get_db(&self) -> i64 {
        self.0.db
    }
}
