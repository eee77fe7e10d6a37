//! The Redis store's core: the backend type, its connections, the scripts
//! it runs and what it guarantees; every seam file builds on it.

use std::sync::Arc;

use super::channels::Channels;
use super::codec::redis_error;
use super::conn::{self, Conn};
use super::keys;
use super::scripts::{PermitScripts, ReaderScripts, Scripts};
use super::url::{RedisUrl, Replicas};
use crate::backend::Capabilities;
use crate::error::{Error, Result};
use crate::name::Name;

/// What RedisBackend guarantees, known without a connection (its
/// `capabilities()` returns this).
pub const CAPABILITIES: Capabilities = Capabilities {
    fifo: true,
    pushed_wakeups: true,
    server_detects_loss: false,
    server_clock: true,
    expires: true,
    durable: true,
    cross_process: true,
    cross_host: true,
    permanent_records: false,
    native_rw_lock: true,
    native_semaphore: true,
};

/// The Redis backend.
pub struct RedisBackend {
    pub(super) address: String,
    pub(super) prefix: String,
    pub(super) cluster: bool,
    pub(super) conn: Conn,
    pub(super) channels: Arc<Channels>,
    pub(super) scripts: Scripts,
    pub(super) permit_scripts: PermitScripts,
    pub(super) reader_scripts: ReaderScripts,
    /// How many replicas must confirm each grant (`replicas=`).
    pub(super) replicas: Option<Replicas>,
}

impl RedisBackend {
    /// Connects to the server of `url`; fails with [`Error::Unavailable`]
    /// when it cannot be reached or refuses the credentials.
    ///
    /// Cancellation: dropping the future drops the connection attempt.
    pub async fn connect(url: &RedisUrl) -> Result<Self> {
        let address = url.to_string();
        if url.tls && !cfg!(feature = "redis-tls") {
            return Err(Error::NotBuilt {
                scheme: "rediss".into(),
                why: "TLS to Redis needs lockward's `redis-tls` cargo feature".into(),
            });
        }
        // Files that cannot be read are the URL's fault: say so before
        // connecting, not as an unreachable server.
        for (what, path) in url.tls_files() {
            crate::url_parts::read_file(what, path)?;
        }
        let conn = Conn::connect(url, None, false)
            .await
            .map_err(|e| conn::connect_error(&address, e))?;
        Ok(RedisBackend {
            channels: Channels::new(url.clone()),
            address,
            prefix: url.prefix.clone(),
            cluster: url.cluster,
            conn,
            scripts: Scripts::new(),
            permit_scripts: PermitScripts::new(),
            reader_scripts: ReaderScripts::new(),
            replicas: url.replicas,
        })
    }

    pub(super) fn keys(&self, name: &Name) -> keys::Keys {
        keys::keys(&self.prefix, name, self.cluster)
    }

    /// Runs a script, once more if the connection dropped under it (the
    /// connection manager reconnects after the failure it reports). Every
    /// script is safe to repeat; `retried` tells the caller it was.
    pub(super) async fn invoke<T: redis::FromRedisValue>(
        &self,
        call: &redis::ScriptInvocation<'_>,
    ) -> Result<(T, bool)> {
        let mut conn = self.conn.clone();
        match call.invoke_async(&mut conn).await {
            Ok(v) => Ok((v, false)),
            Err(e) if e.is_connection_dropped() || e.is_io_error() => {
                tracing::debug!(address = %self.address, error = %e, "connection dropped; retrying once");
                call.invoke_async(&mut conn)
                    .await
                    .map(|v| (v, true))
                    .map_err(|e| self.unavailable(e))
            }
            Err(e) => Err(self.unavailable(e)),
        }
    }

    /// The names starting with `prefix` that have a key ending in
    /// `suffix` (a semaphore's holders, a read-write lock's readers).
    pub(super) async fn names_with(&self, prefix: &str, suffix: &str) -> Result<Vec<Name>> {
        let pattern = keys::scan_pattern(&self.prefix, prefix, self.cluster);
        let found = conn::scan_all(&self.conn, &format!("{pattern}{suffix}"))
            .await
            .map_err(|e| self.unavailable(e))?;
        let mut names: Vec<Name> = found
            .iter()
            .filter_map(|k| k.strip_prefix(self.prefix.as_str()))
            .filter_map(|k| k.strip_suffix(suffix))
            .filter_map(|k| keys::name_of(k, self.cluster))
            .filter_map(|n| Name::new(n).ok())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    pub(super) fn unavailable(&self, e: redis::RedisError) -> Error {
        redis_error(&self.address, e)
    }

    pub(super) fn protocol(&self, message: impl Into<String>) -> Error {
        Error::Protocol {
            address: self.address.clone(),
            message: message.into(),
            cause: None,
        }
    }
}
