//! Sessions of their own, for locks that belong to a server session (the
//! advisory locks of advisory mode, the batons of lease mode): taken from
//! the idle ones or opened, given back holding nothing, and cancelled and
//! closed when a wait on one is given up.

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row};

use super::core;
use super::url::PostgresUrl;
use crate::backend::sessions::IdleSessions;
use crate::error::Result;

/// A session, and the statements prepared on it (prepared once, a
/// statement is then one round trip with nothing to parse or plan).
pub(super) struct Session {
    client: Client,
    prepared: core::Prepared,
}

impl Session {
    fn new(client: Client) -> Session {
        Session {
            client,
            prepared: core::Prepared::default(),
        }
    }

    /// Runs `sql`, prepared on this session at its first use.
    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let statement = self.prepared.statement(&self.client, sql).await?;
        self.client.query(&statement, params).await
    }
}

impl std::ops::Deref for Session {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

/// The sessions of one store.
pub(super) struct Sessions {
    url: PostgresUrl,
    address: String,
    /// Sessions holding nothing, for the next lock or wait.
    idle: IdleSessions<Session>,
}

impl Sessions {
    pub(super) fn new(url: &PostgresUrl, address: &str) -> Sessions {
        Sessions {
            url: url.clone(),
            address: address.to_string(),
            idle: IdleSessions::default(),
        }
    }

    /// An idle session that is still open, or a new one.
    pub(super) async fn take(&self) -> Result<Session> {
        match self.idle.take(|c| !c.is_closed()) {
            Some(c) => Ok(c),
            None => Ok(Session::new(
                core::open(&self.url, &self.address, |_| {}, || {}).await?,
            )),
        }
    }

    /// Keeps `client`, which holds nothing, for the next use (or closes it
    /// when enough are idle).
    pub(super) fn put_back(&self, client: Session) {
        if !client.is_closed() {
            self.idle.put_back(client);
        }
    }
}

/// A session about to wait in the server's lock queue; if the wait is
/// dropped, its statement is cancelled and the session closed, so the
/// server takes it out of the queue (and frees a lock granted at that very
/// moment, with the session).
pub(super) struct Waiting {
    client: Option<Session>,
}

impl Waiting {
    pub(super) fn new(client: Session) -> Waiting {
        Waiting {
            client: Some(client),
        }
    }

    /// The session.
    pub(super) fn client(&self) -> &Session {
        self.client
            .as_ref()
            .expect("a Waiting holds its session until taken")
    }

    /// The session back, the wait over.
    pub(super) fn take(mut self) -> Session {
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
