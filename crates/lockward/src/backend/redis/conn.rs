//! One Redis server or a Redis Cluster, behind one connection type, so the
//! scripts and commands are written once.

use std::time::Duration;

use redis::aio::{AsyncPushSender, ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{
    Cmd, ConnectionAddr, Pipeline, ProtocolVersion, RedisConnectionInfo, RedisFuture, RedisResult,
    Value,
};

use super::sentinel::{Followed, SentinelConn};
#[cfg(feature = "redis-tls")]
use super::tls;
use super::url::RedisUrl;
use crate::error::{Cause, Error};

/// How long one connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a command may wait for its reply (a paused server, a cut link).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A managed connection: reconnects by itself after failures.
#[derive(Clone)]
pub enum Conn {
    /// One server, multiplexed.
    Single(ConnectionManager),
    /// A cluster; commands go to the node owning their key's slot.
    Cluster(ClusterConnection),
    /// The primary Sentinel names, followed across failovers.
    Sentinel(Followed),
}

impl Conn {
    /// Connects to `url`. With `push`, the connection speaks RESP3, hands
    /// pushed messages to it and restores subscriptions after reconnects.
    /// With `lazy` (one server only), it returns at once and connects on
    /// first use, so a server that is down now can join later.
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(
        url: &RedisUrl,
        push: Option<Box<dyn AsyncPushSender>>,
        lazy: bool,
    ) -> RedisResult<Conn> {
        let protocol = if push.is_some() {
            ProtocolVersion::RESP3
        } else {
            ProtocolVersion::RESP2
        };
        if url.cluster {
            let mut builder = ClusterClientBuilder::new(
                url.endpoints
                    .iter()
                    .map(|e| ConnectionAddr::Tcp(e.host.clone(), e.port))
                    .collect::<Vec<_>>(),
            )
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .retries(2)
            .use_protocol(protocol);
            if let Some(user) = &url.user {
                builder = builder.username(user);
            }
            if let Some(password) = &url.password {
                builder = builder.password(password.expose());
            }
            if let Some(push) = push {
                builder = builder.push_sender(PushBox(push));
            }
            #[cfg(feature = "redis-tls")]
            if url.tls {
                builder = builder
                    .tls(redis::cluster::TlsMode::Secure)
                    .certs(tls::certificates(url)?);
            }
            let client = builder.build()?;
            return Ok(Conn::Cluster(client.get_async_connection().await?));
        }
        let managed = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1));
        if url.sentinel.is_some() {
            let conn = SentinelConn::connect(url, managed, push).await?;
            return Ok(Conn::Sentinel(Followed(conn)));
        }
        let endpoint = &url.endpoints[0];
        let mut settings = RedisConnectionInfo::default()
            .set_db(i64::from(url.db))
            .set_protocol(protocol);
        if let Some(user) = &url.user {
            settings = settings.set_username(user);
        }
        if let Some(password) = &url.password {
            settings = settings.set_password(password.expose());
        }
        let client = super::client::for_endpoint(url, endpoint, settings)?;
        let mut config = managed;
        if let Some(push) = push {
            config = config
                .set_push_sender(PushBox(push))
                .set_automatic_resubscription();
        }
        let manager = if lazy {
            ConnectionManager::new_lazy_with_config(client, config)?
        } else {
            ConnectionManager::new_with_config(client, config).await?
        };
        Ok(Conn::Single(manager))
    }

    /// SUBSCRIBE (RESP3 connections only).
    ///
    /// Cancellation: the SUBSCRIBE may or may not have been sent; the
    /// connection's subscriptions are restored on reconnection.
    pub async fn subscribe(&mut self, channel: &[u8]) -> RedisResult<()> {
        match self {
            Conn::Single(c) => c.subscribe(channel).await,
            Conn::Cluster(c) => c.subscribe(channel).await,
            Conn::Sentinel(c) => c.0.subscribe(channel).await,
        }
    }

    /// UNSUBSCRIBE (RESP3 connections only).
    ///
    /// Cancellation: the UNSUBSCRIBE may or may not have been sent; an extra
    /// message on the channel wakes nobody.
    pub async fn unsubscribe(&mut self, channel: &[u8]) -> RedisResult<()> {
        match self {
            Conn::Single(c) => c.unsubscribe(channel).await,
            Conn::Cluster(c) => c.unsubscribe(channel).await,
            Conn::Sentinel(c) => c.0.unsubscribe(channel).await,
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
            Conn::Sentinel(c) => c.get_db(),
        }
    }
}

/// Lets a boxed push sender be handed to redis-rs, which wants a sized one.
struct PushBox(Box<dyn AsyncPushSender>);

impl AsyncPushSender for PushBox {
    fn send(&self, info: redis::PushInfo) -> std::result::Result<(), redis::aio::SendError> {
        self.0.send(info)
    }
}

/// Scans keys matching `pattern` on every node that holds keys: the one
/// server, or each primary of a cluster (found with `CLUSTER SHARDS`-era
/// `CLUSTER NODES`).
///
/// Cancellation: dropping the future ends the scan; it changes nothing.
pub async fn scan_all(conn: &Conn, pattern: &str) -> RedisResult<Vec<String>> {
    let mut keys = Vec::new();
    match conn {
        Conn::Single(c) => scan_node(&mut c.clone(), None, pattern, &mut keys).await?,
        Conn::Sentinel(c) => scan_node(&mut c.0.manager(), None, pattern, &mut keys).await?,
        Conn::Cluster(c) => {
            let mut c = c.clone();
            let nodes: String = redis::cmd("CLUSTER")
                .arg("NODES")
                .query_async(&mut c)
                .await?;
            for line in nodes.lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let primary = fields.get(2).is_some_and(|f| f.contains("master"))
                    && !fields.get(2).is_some_and(|f| f.contains("fail"));
                let Some(addr) = fields.get(1).filter(|_| primary) else {
                    continue;
                };
                // host:port@busport
                let hostport = addr.split('@').next().unwrap_or(addr);
                let Some((host, port)) = hostport.rsplit_once(':') else {
                    continue;
                };
                let Ok(port) = port.parse() else { continue };
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.to_string(),
                    port,
                });
                scan_node(&mut c, Some(route), pattern, &mut keys).await?;
            }
        }
    }
    Ok(keys)
}

async fn scan_node<C: ConnectionLike + ScanRoute>(
    conn: &mut C,
    route: Option<RoutingInfo>,
    pattern: &str,
    keys: &mut Vec<String>,
) -> RedisResult<()> {
    let mut cursor: u64 = 0;
    loop {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000);
        let (next, batch): (u64, Vec<String>) = conn.send_routed(cmd, route.clone()).await?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            return Ok(());
        }
    }
}

/// Sends a command to one node when a route is given (clusters only).
trait ScanRoute {
    async fn send_routed<T: redis::FromRedisValue>(
        &mut self,
        cmd: Cmd,
        route: Option<RoutingInfo>,
    ) -> RedisResult<T>;
}

impl ScanRoute for ConnectionManager {
    async fn send_routed<T: redis::FromRedisValue>(
        &mut self,
        cmd: Cmd,
        _route: Option<RoutingInfo>,
    ) -> RedisResult<T> {
        cmd.query_async(self).await
    }
}

impl ScanRoute for ClusterConnection {
    async fn send_routed<T: redis::FromRedisValue>(
        &mut self,
        cmd: Cmd,
        route: Option<RoutingInfo>,
    ) -> RedisResult<T> {
        match route {
            Some(route) => Ok(redis::from_redis_value(
                self.route_command(cmd, route).await?,
            )?),
            None => cmd.query_async(self).await,
        }
    }
}

/// lockward's error for a failed connection attempt.
pub fn connect_error(address: &str, e: redis::RedisError) -> Error {
    let text = e.to_string();
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || text.contains("WRONGPASS")
        || text.contains("NOAUTH")
        || text.contains("invalid password")
    {
        return Error::Denied {
            address: address.to_string(),
            message: "authentication failed: check the user and password in the URL".to_string(),
            cause: Some(Cause::of(&e)),
        };
    }
    Error::Unavailable {
        address: address.to_string(),
        message: format!("cannot connect (is redis-server running there?): {text}"),
        cause: Some(Cause::of(&e)),
    }
}
