//! The store's ZooKeeper session: one per store, replaced when it expires.
//!
//! Every lock of the store is an ephemeral node of this session. Any
//! disconnection bumps the session's *epoch*: a lock taken in an earlier
//! epoch counts as lost (Curator's "suspended" rule: while disconnected the
//! holder cannot know whether the server has expired the session and given
//! the lock to someone else).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use zookeeper_client::{Client, SessionState};

use super::url::ZookeeperUrl;
use crate::error::{Cause, Error, Result};

/// How long to wait for a session to be established.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The current client and how to make the next one.
pub struct Session {
    address: String,
    url: ZookeeperUrl,
    current: RwLock<Client>,
    /// Bumped at every disconnection and every new session.
    epoch: Arc<AtomicU64>,
    /// Serializes reconnections after an expiry.
    reconnecting: tokio::sync::Mutex<()>,
}

impl Session {
    /// Connects to the ensemble of `url`.
    ///
    /// Cancellation: dropping the future closes the session being opened.
    pub async fn connect(url: &ZookeeperUrl, address: String) -> Result<Session> {
        let epoch = Arc::new(AtomicU64::new(0));
        let client = open(url, &address, &epoch).await?;
        Ok(Session {
            address,
            url: url.clone(),
            current: RwLock::new(client),
            epoch,
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    /// The client in use and the epoch it is in. Read the epoch before the
    /// request whose outcome it must vouch for.
    pub fn client(&self) -> (Client, u64) {
        let epoch = self.epoch.load(Ordering::SeqCst);
        let client = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        (client, epoch)
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The session timeout the server granted.
    pub fn timeout(&self) -> Duration {
        self.client().0.session_timeout()
    }

    /// Replaces the session if `stale` (the id of the one that failed) is
    /// still the current one and has expired.
    ///
    /// Cancellation: dropping the future keeps the stale session; the next
    /// caller renews it.
    pub async fn renew(&self, stale: zookeeper_client::SessionId) -> Result<()> {
        let _one_at_a_time = self.reconnecting.lock().await;
        let (client, _) = self.client();
        if client.session_id() != stale || !is_terminal(client.state()) {
            return Ok(());
        }
        tracing::warn!(address = %self.address, "ZooKeeper session expired; opening a new one");
        let fresh = open(&self.url, &self.address, &self.epoch).await?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }
}

fn is_terminal(state: SessionState) -> bool {
    matches!(
        state,
        SessionState::Expired | SessionState::Closed | SessionState::AuthFailed
    )
}

/// Opens a session and starts counting its disconnections.
async fn open(url: &ZookeeperUrl, address: &str, epoch: &Arc<AtomicU64>) -> Result<Client> {
    let hosts: Vec<String> = url.endpoints.iter().map(|e| e.to_string()).collect();
    let mut connector = Client::connector()
        .with_session_timeout(url.session_timeout)
        .with_connection_timeout(CONNECT_TIMEOUT);
    if let (Some(user), Some(password)) = (&url.user, &url.password) {
        let credentials = format!("{user}:{}", password.expose());
        connector = connector.with_auth("digest", credentials.as_bytes());
    }
    let hosts = hosts.join(",");
    let connecting = async {
        if url.tls {
            tls::connect(connector, url, &hosts).await
        } else {
            Ok(connector.connect(&hosts).await)
        }
    };
    let client = match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(connected) => match connected? {
            Ok(client) => client,
            Err(e) => return Err(unavailable(address, &e)),
        },
        Err(_) => {
            return Err(Error::Unavailable {
                address: address.to_string(),
                message: format!("no session within {CONNECT_TIMEOUT:?}"),
                cause: None,
            })
        }
    };
    epoch.fetch_add(1, Ordering::SeqCst);
    let mut states = client.state_watcher();
    let epoch = epoch.clone();
    tokio::spawn(async move {
        loop {
            let state = states.changed().await;
            if state != SessionState::SyncConnected {
                epoch.fetch_add(1, Ordering::SeqCst);
            }
            if is_terminal(state) {
                return;
            }
        }
    });
    Ok(client)
}

/// A ZooKeeper error as lockward's, naming the store.
pub fn unavailable(address: &str, e: &zookeeper_client::Error) -> Error {
    match e {
        zookeeper_client::Error::AuthFailed | zookeeper_client::Error::NoAuth => Error::Denied {
            address: address.to_string(),
            message:
                "authentication failed or not authorized: check the user and password in the URL"
                    .to_string(),
            cause: Some(Cause::of(e)),
        },
        other => Error::Unavailable {
            address: address.to_string(),
            message: other.to_string(),
            cause: Some(Cause::of(e)),
        },
    }
}

/// The ACLs of lockward's nodes: creator-only with digest authentication,
/// open to anyone without it.
pub fn acls(url: &ZookeeperUrl) -> zookeeper_client::Acls<'static> {
    if url.user.is_some() {
        zookeeper_client::Acls::creator_all()
    } else {
        zookeeper_client::Acls::anyone_all()
    }
}

/// TLS to the ensemble (`zks://`).
mod tls {
    use zookeeper_client::{Client, Connector};

    use super::super::url::ZookeeperUrl;
    use crate::error::Result;

    /// Connects over TLS with the URL's roots and client certificate; a
    /// file that cannot be read is the URL's fault.
    ///
    /// Cancellation: dropping the future closes the session being opened.
    #[cfg(feature = "zookeeper-tls")]
    pub async fn connect(
        mut connector: Connector,
        url: &ZookeeperUrl,
        hosts: &str,
    ) -> Result<std::result::Result<Client, zookeeper_client::Error>> {
        // rustls needs one process-wide crypto provider; a second install
        // (by us or by the application) is refused harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let text = |what: &str, path: &std::path::Path| -> Result<String> {
            String::from_utf8(crate::url_parts::read_file(what, path)?).map_err(|_| {
                crate::url_parts::url_error(format!(
                    "the {what} file {} is not PEM text",
                    path.display()
                ))
            })
        };
        let mut options = zookeeper_client::TlsOptions::new();
        if let Some(ca) = &url.ca {
            options = options.with_pem_ca(&text("CA", ca)?).map_err(|e| {
                crate::url_parts::url_error(format!("the CA file {}: {e}", ca.display()))
            })?;
        }
        if let Some((cert, key)) = &url.client_cert {
            options = options
                .with_pem_identity(
                    &text("client certificate", cert)?,
                    &text("client key", key)?,
                )
                .map_err(|e| crate::url_parts::url_error(format!("the client certificate: {e}")))?;
        }
        connector = connector.with_tls(options);
        Ok(connector.secure_connect(hosts).await)
    }

    /// Without the `zookeeper-tls` feature, `zks://` is refused clearly.
    ///
    /// Cancellation: dropping the future closes the session being opened.
    #[cfg(not(feature = "zookeeper-tls"))]
    pub async fn connect(
        _connector: Connector,
        _url: &ZookeeperUrl,
        _hosts: &str,
    ) -> Result<std::result::Result<Client, zookeeper_client::Error>> {
        Err(crate::error::Error::NotBuilt {
            scheme: "zks".into(),
            why: "TLS to ZooKeeper needs lockward's `zookeeper-tls` cargo feature".into(),
        })
    }
}
