//! Sessions of their own, for locks that belong to a server session (the
//! advisory locks of advisory mode, the batons of lease mode): taken from
//! the idle ones or opened, given back holding nothing, and cancelled and
//! closed when a wait on one is given up.

use std::sync::Mutex;

use tokio_postgres::{Client, NoTls};

use super::conn;
use super::url::PostgresUrl;
use crate::error::Result;

/// The most idle sessions a store keeps; more are closed when given back
/// (a burst of waiters would otherwise keep as many connections open).
const MAX_IDLE: usize = 16;

/// The sessions of one store.
pub(super) struct Sessions {
    url: PostgresUrl,
    address: String,
    /// Sessions holding nothing, for the next lock or wait.
    idle: Mutex<Vec<Client>>,
}

impl Sessions {
    pub(super) fn new(url: &PostgresUrl, address: &str) -> Sessions {
        Sessions {
            url: url.clone(),
            address: address.to_string(),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle session that is still open, or a new one.
    pub(super) async fn take(&self) -> Result<Client> {
        let reusable = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            std::iter::from_fn(|| idle.pop()).find(|c| !c.is_closed())
        };
        match reusable {
            Some(c) => Ok(c),
            None => conn::open(&self.url, &self.address, |_| {}, || {}).await,
        }
    }

    /// Keeps `client`, which holds nothing, for the next use (or closes it
    /// when enough are idle).
    pub(super) fn put_back(&self, client: Client) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if !client.is_closed() && idle.len() < MAX_IDLE {
            idle.push(client);
        }
    }
}

/// A session about to wait in the server's lock queue; if the wait is
/// dropped, its statement is cancelled and the session closed, so the
/// server takes it out of the queue (and frees a lock granted at that very
/// moment, with the session).
pub(super) struct Waiting {
    client: Option<Client>,
}

impl Waiting {
    pub(super) fn new(client: Client) -> Waiting {
        Waiting {
            client: Some(client),
        }
    }

    /// The session.
    pub(super) fn client(&self) -> &Client {
        self.client
            .as_ref()
            .expect("a Waiting holds its session until taken")
    }

    /// The session back, the wait over.
    pub(super) fn take(mut self) -> Client {
        self.client
            .take()
            .expect("a Waiting holds its session until taken")
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let cancel = client.cancel_token();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = cancel.cancel_query(NoTls).await;
                    drop(client);
                });
            }
        }
    }
}
