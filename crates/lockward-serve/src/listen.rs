//! Where the daemon listens: a unix socket (the default; only its owner
//! and group may connect) or a TCP address: on this host's loopback, or,
//! with TLS and a token, one that other hosts reach.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};

use tonic::server::NamedService;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::pb::elections_server::ElectionsServer;
use crate::pb::keys_server::KeysServer;
use crate::pb::limits_server::LimitsServer;
use crate::pb::locks_server::LocksServer;
use crate::pb_dapr::dapr_server::DaprServer;
use crate::service::Service;

/// The default address: a unix socket.
pub const DEFAULT_LISTEN: &str = "unix:///run/lockward/lockward.sock";

/// An address to listen on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// `unix://PATH`: a unix socket, mode 0660.
    Unix(PathBuf),
    /// `IP:PORT` (`127.0.0.1:7443`, `[::1]:7443`; another address only
    /// with TLS and a token).
    Tcp(SocketAddr),
}

/// Why the daemon cannot listen or serve.
#[derive(Debug)]
pub enum ListenError {
    /// The address is not one it can listen on.
    Invalid(String),
    /// Binding or preparing the socket failed.
    Bind(String, std::io::Error),
    /// The server stopped with an error.
    Serve(String),
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenError::Invalid(why) => write!(f, "invalid --listen: {why}"),
            ListenError::Bind(what, e) => write!(f, "cannot listen on {what}: {e}"),
            ListenError::Serve(why) => write!(f, "the server stopped: {why}"),
        }
    }
}

impl std::error::Error for ListenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ListenError::Bind(_, e) => Some(e),
            _ => None,
        }
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(path) => write!(f, "unix://{}", path.display()),
            Listen::Tcp(addr) => write!(f, "{addr}"),
        }
    }
}

impl Listen {
    /// `unix://PATH` or `IP:PORT`.
    pub fn parse(text: &str) -> Result<Listen, ListenError> {
        if let Some(path) = text.strip_prefix("unix://") {
            if path.is_empty() {
                return Err(ListenError::Invalid("unix:// needs a path".into()));
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        let addr: SocketAddr = text.parse().map_err(|_| {
            ListenError::Invalid(format!(
                "{text:?} is neither unix://PATH nor IP:PORT (e.g. 127.0.0.1:7443)"
            ))
        })?;
        Ok(Listen::Tcp(addr))
    }

    /// Whether `service` may be served here: a TCP address other hosts
    /// can reach needs TLS (or anyone on the path reads the token and the
    /// fences) and a token (or anyone who reaches it takes and breaks
    /// locks).
    pub fn check(&self, service: &Service) -> Result<(), ListenError> {
        exposure(self, service)
    }

    /// Binds the address. A unix socket left by a daemon that died is
    /// replaced; one a live daemon listens on is refused.
    pub async fn bind(&self) -> Result<Bound, ListenError> {
        let bind_error = |e| ListenError::Bind(self.to_string(), e);
        match self {
            Listen::Tcp(addr) => TcpListener::bind(addr)
                .await
                .map(Bound::Tcp)
                .map_err(bind_error),
            Listen::Unix(path) => {
                prepare_socket_path(path).await.map_err(bind_error)?;
                let listener = UnixListener::bind(path).map_err(bind_error)?;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
                    .map_err(bind_error)?;
                Ok(Bound::Unix(listener, path.clone()))
            }
        }
    }

    /// Binds, then serves `service` until `shutdown` resolves.
    ///
    /// Cancellation: dropping the future closes the socket and ends every
    /// stream, which releases every lease.
    pub(crate) async fn serve(
        &self,
        service: Service,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> Result<(), ListenError> {
        self.check(&service)?;
        self.bind().await?.serve(service, shutdown).await
    }
}

/// [`Listen::check`] of `listen`.
fn exposure(listen: &Listen, service: &Service) -> Result<(), ListenError> {
    let Listen::Tcp(addr) = listen else {
        return Ok(());
    };
    if addr.ip().is_loopback()
        || (service.tls_identity().is_some() && service.required_token().is_some())
    {
        return Ok(());
    }
    Err(ListenError::Invalid(format!(
        "{addr} is reachable from other hosts: serve it with TLS (--tls-cert, --tls-key) \
         and a token (--token-file), or listen on 127.0.0.1:PORT or a unix socket"
    )))
}

/// Makes room for a unix socket at `path`: its folder is created; a socket
/// file nobody listens on any more is removed.
async fn prepare_socket_path(path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(dir).await?;
    }
    if tokio::fs::symlink_metadata(path).await.is_ok() {
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "a daemon is listening there already",
            ));
        }
        tokio::fs::remove_file(path).await?;
    }
    Ok(())
}

/// A bound address, ready to serve.
#[derive(Debug)]
pub enum Bound {
    /// A unix socket, and its path (removed when the server stops).
    Unix(UnixListener, PathBuf),
    /// A TCP listener.
    Tcp(TcpListener),
}

impl Bound {
    /// The TCP address bound (its port, when 0 was asked for).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Bound::Tcp(listener) => listener.local_addr().ok(),
            Bound::Unix(..) => None,
        }
    }

    /// Gives a unix socket to `group`, whose members may then connect
    /// (mode 0660). A TCP address has no group: `Invalid`.
    pub fn give_to_group(&self, group: &str) -> Result<(), ListenError> {
        let Bound::Unix(_, path) = self else {
            return Err(ListenError::Invalid(
                "--group applies to a unix socket, not a TCP address".into(),
            ));
        };
        let gid = group_id(group)?;
        std::os::unix::fs::chown(path, None, Some(gid))
            .map_err(|e| ListenError::Bind(format!("{} for group {group}", path.display()), e))
    }

    /// Serves `service` until `shutdown` resolves.
    ///
    /// Cancellation: dropping the future closes the socket and ends every
    /// stream, which releases every lease.
    pub async fn serve(
        self,
        service: Service,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> Result<(), ListenError> {
        let listen = match &self {
            Bound::Tcp(listener) => Listen::Tcp(
                listener
                    .local_addr()
                    .map_err(|e| ListenError::Bind("the TCP listener".into(), e))?,
            ),
            Bound::Unix(_, path) => Listen::Unix(path.clone()),
        };
        exposure(&listen, &service)?;
        // Stopping, every lease stream first releases what it holds and
        // ends; the server then finishes, without waiting for clients that
        // keep their connections open once no lease is left to release.
        let (health, health_service) = tonic_health::server::health_reporter();
        set_health(&health, ServingStatus::Serving).await;
        let stopper = service.clone();
        let (began, stopping) = tokio::sync::oneshot::channel();
        let shutdown = async move {
            shutdown.await;
            set_health(&health, ServingStatus::NotServing).await;
            stopper.stop();
            let _ = began.send(());
        };
        let ended = service.clone();
        let released = async move {
            match stopping.await {
                Ok(()) => ended.leases_ended(RELEASE_GRACE).await,
                Err(_) => std::future::pending().await,
            }
        };
        // lockward's API, Dapr's lock calls and gRPC's health protocol over
        // HTTP/2, and the health route Dapr's SDKs ask for over HTTP/1.1
        // before their first call.
        let mut routes = tonic::service::Routes::new(LocksServer::new(service.clone()))
            .add_service(ElectionsServer::new(service.clone()))
            .add_service(KeysServer::new(service.clone()))
            .add_service(LimitsServer::new(service.clone()))
            .add_service(DaprServer::new(service.dapr()))
            .add_service(health_service)
            .into_axum_router()
            .route(
                "/v1.0/healthz/outbound",
                axum::routing::get(|| async { axum::http::StatusCode::NO_CONTENT }),
            );
        if let Some(token) = service.required_token() {
            routes = routes.layer(axum::middleware::from_fn_with_state(
                token.clone(),
                crate::auth::require,
            ));
        }
        let mut server = tonic::transport::Server::builder();
        if let Some(tls) = service.tls_identity() {
            server = server
                .tls_config(tls.config())
                .map_err(|e| ListenError::Serve(format!("TLS: {e}")))?;
        }
        let router = server
            .accept_http1(true)
            // One client may hold many leases on one connection, not
            // without bound: a stream past the limit is refused.
            .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
            // HTTP/2 closes a connection that has too many small messages
            // waiting to be read, counted against half this window; a lease
            // opens with one small message, so the window is sized for
            // every stream of a connection opening at once.
            .initial_connection_window_size(CONNECTION_WINDOW)
            // A client that stops answering pings (frozen, gone without a
            // FIN) has its streams ended, which releases its leases.
            .http2_keepalive_interval(Some(KEEPALIVE))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
            .add_routes(routes.into());
        let (served, path) = match self {
            Bound::Tcp(listener) => {
                // Small messages both ways: Nagle's algorithm would hold a
                // Granted back until the client's delayed ACK (about 40 ms).
                let incoming = TcpListenerStream::new(listener).map(|accepted| {
                    accepted.and_then(|stream| stream.set_nodelay(true).map(|()| stream))
                });
                let serving = router.serve_with_incoming_shutdown(incoming, shutdown);
                (until_released(serving, released).await, None)
            }
            Bound::Unix(listener, path) => {
                let serving = router
                    .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown);
                (until_released(serving, released).await, Some(path))
            }
        };
        if let Some(path) = path {
            let _ = std::fs::remove_file(&path);
        }
        served.map_err(|e| ListenError::Serve(e.to_string()))
    }
}

/// The id of the group named `group` (or given by number).
fn group_id(group: &str) -> Result<u32, ListenError> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    let unknown = || ListenError::Invalid(format!("--group: no group named {group:?}"));
    let name = std::ffi::CString::new(group).map_err(|_| unknown())?;
    let mut entry: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: every pointer is valid for the call; getgrnam_r writes the
    // entry's strings into buf, which outlives the read of gr_gid below.
    let rc = unsafe {
        libc::getgrnam_r(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Err(unknown());
    }
    Ok(entry.gr_gid)
}

/// Sets the health of the whole server ("") and of each service.
async fn set_health(health: &HealthReporter, status: ServingStatus) {
    let services = [
        "",
        <LocksServer<Service> as NamedService>::NAME,
        <ElectionsServer<Service> as NamedService>::NAME,
        <KeysServer<Service> as NamedService>::NAME,
        <LimitsServer<Service> as NamedService>::NAME,
    ];
    for name in services {
        health.set_service_status(name, status).await;
    }
}

/// The most streams (leases, candidacies, claims, observers) one
/// connection may have open at once.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 16_384;

/// The HTTP/2 connection window: room for the first message of every
/// stream a connection may open at once (about 230 bytes of HTTP/2's
/// budget each).
const CONNECTION_WINDOW: u32 = 8 * 1024 * 1024;

/// How often the server pings a quiet connection.
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a ping may go unanswered before the connection is closed.
const KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a stopping server waits for its lease streams to release.
const RELEASE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// `serving` until it finishes, or until `released` (the server is stopping
/// and every lease stream has ended).
async fn until_released<E>(
    serving: impl std::future::Future<Output = Result<(), E>>,
    released: impl std::future::Future<Output = ()>,
) -> Result<(), E> {
    tokio::select! {
        served = serving => served,
        () = released => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sockets_and_addresses() {
        assert_eq!(
            Listen::parse("unix:///run/lockward/lockward.sock").unwrap(),
            Listen::Unix("/run/lockward/lockward.sock".into())
        );
        assert_eq!(
            Listen::parse("127.0.0.1:7443").unwrap(),
            Listen::Tcp("127.0.0.1:7443".parse().unwrap())
        );
        // Parsed; whether it may be served depends on the service.
        assert_eq!(
            Listen::parse("0.0.0.0:7443").unwrap(),
            Listen::Tcp("0.0.0.0:7443".parse().unwrap())
        );
        assert!(matches!(
            Listen::parse("unix://"),
            Err(ListenError::Invalid(_))
        ));
        assert!(matches!(
            Listen::parse("localhost"),
            Err(ListenError::Invalid(_))
        ));
    }
}
