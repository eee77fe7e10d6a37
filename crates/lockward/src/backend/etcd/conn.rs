//! etcd connections: one client per member with the store's credentials and
//! TLS, moving to the next member when one stops answering, and the side
//! client the doctor and the bench use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use super::core::{EtcdBackend, CALL_TIMEOUT, CONNECT_TIMEOUT};
use super::url::EtcdUrl;
use crate::error::{Cause, Error, Result};

impl EtcdBackend {
    /// Connects to the cluster of `url`.
    ///
    /// Cancellation: dropping the future drops the connection attempts.
    pub async fn connect(url: &EtcdUrl) -> Result<Self> {
        let address = url.to_string();
        let options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_require_leader(true)
            // Notice a dead member within about two seconds.
            .with_keep_alive(Duration::from_secs(1), Duration::from_secs(1))
            .with_keep_alive_while_idle(true);
        let options = with_identity(options, url)?;
        let mut clients = Vec::new();
        for endpoint in endpoint_urls(url) {
            let connect = Client::connect([endpoint], Some(options.clone()));
            match tokio::time::timeout(CONNECT_TIMEOUT * 2, connect).await {
                Ok(Ok(client)) => clients.push(client),
                Ok(Err(e)) => return Err(unavailable(&address, e)),
                Err(_) => {
                    return Err(Error::Unavailable {
                        address,
                        message: format!("no answer within {:?}", CONNECT_TIMEOUT * 2),
                        cause: None,
                    })
                }
            }
        }
        let backend = EtcdBackend {
            address,
            prefix: url.prefix.clone(),
            clients,
            current: AtomicUsize::new(0),
            leases: Mutex::new(HashMap::new()),
        };
        // A round trip now, so a cluster that is down fails here, clearly.
        backend
            .call(|mut c| async move { c.get("lockward-ping", None).await })
            .await?;
        Ok(backend)
    }

    /// The client of the member in use.
    pub(super) fn client(&self) -> Client {
        self.clients[self.current.load(Ordering::Relaxed) % self.clients.len()].clone()
    }

    /// Runs one unary call with a timeout, on the member in use, moving on
    /// to the next member when it cannot be reached. Every call lockward
    /// makes is safe to repeat (the put is conditional on absence; a lease
    /// granted twice just expires).
    pub(super) async fn call<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn(Client) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let mut last = None;
        for _ in 0..self.clients.len() {
            let at = self.current.load(Ordering::Relaxed);
            let client = self.clients[at % self.clients.len()].clone();
            let error = match tokio::time::timeout(CALL_TIMEOUT, op(client)).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if !unreachable(&e) => return Err(unavailable(&self.address, e)),
                Ok(Err(e)) => unavailable(&self.address, e),
                Err(_) => Error::Unavailable {
                    address: self.address.clone(),
                    message: format!("no answer within {CALL_TIMEOUT:?}"),
                    cause: None,
                },
            };
            // Move on, unless another call moved on already.
            let _ = self
                .current
                .compare_exchange(at, at + 1, Ordering::Relaxed, Ordering::Relaxed);
            last = Some(error);
        }
        Err(last.unwrap_or_else(|| Error::Unavailable {
            address: self.address.clone(),
            message: "no members".into(),
            cause: None,
        }))
    }
}

/// `options` with the credentials of `url`, and its TLS settings for
/// `etcds://` (refused when lockward was built without `etcd-tls`).
pub(super) fn with_identity(mut options: ConnectOptions, url: &EtcdUrl) -> Result<ConnectOptions> {
    if url.tls && !cfg!(feature = "etcd-tls") {
        return Err(Error::NotBuilt {
            scheme: "etcds".into(),
            why: "TLS to etcd needs lockward's `etcd-tls` cargo feature".into(),
        });
    }
    if let (Some(user), Some(password)) = (&url.user, &url.password) {
        options = options.with_user(user.clone(), password.expose().to_string());
    }
    #[cfg(feature = "etcd-tls")]
    if url.tls {
        options = options.with_tls(tls_options(url)?);
    }
    Ok(options)
}

/// Each endpoint of `url` with its scheme, as the client takes it.
pub(super) fn endpoint_urls(url: &EtcdUrl) -> Vec<String> {
    let scheme = if url.tls { "https" } else { "http" };
    url.endpoints
        .iter()
        .map(|e| format!("{scheme}://{e}"))
        .collect()
}

/// A plain client on every endpoint of `url`, with its credentials (and
/// TLS), for one-off calls beside the store: the doctor's checks and the
/// bench's floor and memory readings.
pub(crate) async fn side_client(url: &EtcdUrl) -> Result<Client> {
    let address = url.to_string();
    let options = ConnectOptions::new()
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout(CONNECT_TIMEOUT);
    let options = with_identity(options, url)?;
    Client::connect(endpoint_urls(url), Some(options))
        .await
        .map_err(|e| unavailable(&address, e))
}

/// The TLS settings of an `etcds://` URL: its `ca=` roots, else the
/// system's.
#[cfg(feature = "etcd-tls")]
pub(super) fn tls_options(url: &EtcdUrl) -> Result<etcd_client::TlsOptions> {
    let mut tls = etcd_client::TlsOptions::new();
    match &url.ca {
        Some(path) => {
            let pem = crate::url_parts::read_file("CA", path)?;
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(pem));
        }
        None => tls = tls.with_native_roots(),
    }
    Ok(tls)
}

/// Whether `e` says the member could not be reached or has no leader (try
/// another), rather than that the request itself was refused.
pub(super) fn unreachable(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(s) => matches!(
            s.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown
        ),
        _ => false,
    }
}

pub(super) fn unavailable(address: &str, e: etcd_client::Error) -> Error {
    let address = address.to_string();
    let denied = |message: String, e: &etcd_client::Error| Error::Denied {
        address: address.clone(),
        message,
        cause: Some(Cause::of(e)),
    };
    let message = match &e {
        etcd_client::Error::GRpcStatus(s)
            if (s.code() == tonic::Code::InvalidArgument
                && s.message().contains("authentication"))
                || s.code() == tonic::Code::Unauthenticated =>
        {
            return denied(
                "authentication failed: check the user and password in the URL".to_string(),
                &e,
            );
        }
        etcd_client::Error::GRpcStatus(s) if s.code() == tonic::Code::PermissionDenied => {
            return denied(
                format!(
                    "the user's role does not allow what lockward needs (read and write of its keys, leases): {}",
                    s.message()
                ),
                &e,
            );
        }
        etcd_client::Error::GRpcStatus(s) => format!("{}: {}", s.code(), s.message()),
        other => other.to_string(),
    };
    Error::Unavailable {
        address,
        message,
        cause: Some(Cause::of(&e)),
    }
}
