//! Connections to PostgreSQL: opening one (password never in messages),
//! creating the lock table, and a shared connection that reopens itself
//! after it dropped (a server restart, `pg_terminate_backend`).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Mutex;
use tokio_postgres::tls::TlsStream;
use tokio_postgres::{AsyncMessage, Client, Config, Connection, NoTls, Statement};

use super::url::PostgresUrl;
use crate::error::{Cause, Error, Result};

/// How long opening a connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The driver's configuration for `url`.
pub fn config(url: &PostgresUrl) -> Config {
    let mut config = Config::new();
    config
        .host(&url.endpoint.host)
        .port(url.endpoint.port)
        .user(&url.user)
        .dbname(&url.db)
        .application_name("lockward")
        .connect_timeout(CONNECT_TIMEOUT);
    if let Some(password) = &url.password {
        config.password(password.expose());
    }
    config
}

/// lockward's error for a driver error. The driver never prints passwords.
pub fn pg_error(address: &str, e: &tokio_postgres::Error) -> Error {
    let denied = |message: String| Error::Denied {
        address: address.to_string(),
        message,
        cause: Some(Cause::of(e)),
    };
    let message = match e.as_db_error() {
        Some(db) if db.code().code() == "28P01" || db.code().code() == "28000" => {
            return denied(
                "authentication failed: check the user and password in the URL".to_string(),
            )
        }
        // insufficient_privilege: a grant is missing.
        Some(db) if db.code().code() == "42501" => {
            return denied(format!("{}: {}", db.code().code(), db.message()))
        }
        // read_only_sql_transaction: a standby, or a read-only role; a
        // failover may make it the primary, so it stays Unavailable.
        Some(db) if db.code().code() == "25006" => format!(
            "{}: the server is read-only (a standby?): point lockward at the primary ({})",
            db.code().code(),
            db.message()
        ),
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    };
    Error::Unavailable {
        address: address.to_string(),
        message,
        cause: Some(Cause::of(e)),
    }
}

/// Opens a connection (with TLS when the URL asks). `on_message` receives
/// notifications (LISTEN); the task driving the connection ends when it
/// drops, calling `on_close`.
///
/// Cancellation: dropping the future drops the connection attempt.
pub async fn open(
    url: &PostgresUrl,
    address: &str,
    on_message: impl Fn(AsyncMessage) + Send + 'static,
    on_close: impl FnOnce() + Send + 'static,
) -> Result<Client> {
    let config = config(url);
    let timed_out = || Error::Unavailable {
        address: address.to_string(),
        message: format!("no answer within {:?}", CONNECT_TIMEOUT * 2),
        cause: None,
    };
    if url.tls {
        #[cfg(feature = "postgres-tls")]
        {
            let tls = tls::connector(url, address)?;
            let (client, connection) =
                tokio::time::timeout(CONNECT_TIMEOUT * 2, config.connect(tls))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|e| pg_error(address, &e))?;
            tokio::spawn(drive(connection, on_message, on_close));
            return Ok(client);
        }
        #[cfg(not(feature = "postgres-tls"))]
        return Err(Error::NotBuilt {
            scheme: "postgres".into(),
            why: "sslmode=require needs lockward's `postgres-tls` cargo feature".into(),
        });
    }
    let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT * 2, config.connect(NoTls))
        .await
        .map_err(|_| timed_out())?
        .map_err(|e| pg_error(address, &e))?;
    tokio::spawn(drive(connection, on_message, on_close));
    Ok(client)
}

/// Drives a connection, handing its asynchronous messages on.
async fn drive<S, T>(
    mut connection: Connection<S, T>,
    on_message: impl Fn(AsyncMessage),
    on_close: impl FnOnce(),
) where
    S: AsyncRead + AsyncWrite + Unpin,
    T: TlsStream + Unpin,
{
    while let Some(Ok(message)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
        on_message(message);
    }
    on_close();
}

#[cfg(feature = "postgres-tls")]
mod tls {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    use tokio_postgres_rustls::MakeRustlsConnect;

    use super::super::url::PostgresUrl;
    use crate::error::{Error, Result};

    /// A verifying TLS connector: the URL's `ca=` roots, else the system's.
    pub fn connector(url: &PostgresUrl, address: &str) -> Result<MakeRustlsConnect> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let bad = |message: String| Error::Unavailable {
            address: address.to_string(),
            message,
            cause: None,
        };
        let mut roots = rustls::RootCertStore::empty();
        match &url.ca {
            Some(path) => {
                let pem = crate::url_parts::read_file("CA", path)?;
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    let cert = cert
                        .map_err(|e| bad(format!("bad certificate in {}: {e}", path.display())))?;
                    roots
                        .add(cert)
                        .map_err(|e| bad(format!("bad certificate in {}: {e}", path.display())))?;
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }
}

/// Creates the lock table, its fence sequence and the tables beside it
/// (records, semaphores) if missing. An advisory
/// lock serialises processes that start at the same moment.
///
/// Cancellation: the schema's transaction is rolled back by the server when the
/// connection drops mid-way.
pub async fn create_schema(client: &Client, table: &str, address: &str) -> Result<()> {
    let ddl = format!(
        "BEGIN;
         SELECT pg_advisory_xact_lock(hashtext('lockward schema {table}'));
         CREATE TABLE IF NOT EXISTS {table} (
             name       text PRIMARY KEY,
             owner      text NOT NULL,
             holder     text,
             fence      bigint NOT NULL,
             expires_at timestamptz NOT NULL,
             pid        integer
         );
         CREATE SEQUENCE IF NOT EXISTS {table}_fence;
         CREATE TABLE IF NOT EXISTS {table}_watched (
             name       text PRIMARY KEY,
             expires_at timestamptz NOT NULL
         );
         CREATE TABLE IF NOT EXISTS {table}_records (
             key        text PRIMARY KEY,
             value      text NOT NULL,
             expires_at timestamptz NOT NULL
         );
         CREATE TABLE IF NOT EXISTS {table}_versioned (
             key        text PRIMARY KEY,
             value      text NOT NULL,
             version    bigint NOT NULL,
             expires_at timestamptz NOT NULL
         );
         {semaphores}
         COMMIT;",
        semaphores = super::permit_sql::schema(table)
    );
    client
        .batch_execute(&ddl)
        .await
        .map_err(|e| pg_error(address, &e))
}

/// Whether the server ends sessions left idle (`idle_session_timeout`,
/// PostgreSQL 14 and later), which lease mode's batons rely on.
///
/// Cancellation: a read; dropping the future changes nothing.
pub async fn ends_idle_sessions(client: &Client) -> bool {
    let version = client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await;
    version.is_ok_and(|row| row.get::<_, i32>(0) >= 140_000)
}

/// One shared connection, reopened on first use after it dropped, with the
/// statements prepared on it (prepared once: a call is then one round trip).
pub struct Shared {
    url: PostgresUrl,
    address: String,
    client: Mutex<Option<Connected>>,
}

/// The statements prepared on one connection, by their text (prepared
/// once, a statement is then one round trip with nothing to parse or plan).
#[derive(Default)]
pub struct Prepared(std::sync::Mutex<std::collections::HashMap<String, Statement>>);

impl Prepared {
    /// `sql` as prepared on `client`, preparing it at its first use.
    ///
    /// Cancellation: a statement prepared meanwhile is not cached; the next
    /// call prepares it again.
    pub async fn statement(
        &self,
        client: &Client,
        sql: &str,
    ) -> std::result::Result<Statement, tokio_postgres::Error> {
        let cached = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sql)
            .cloned();
        if let Some(statement) = cached {
            return Ok(statement);
        }
        let statement = client.prepare(sql).await?;
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sql.to_string(), statement.clone());
        Ok(statement)
    }
}

/// A live connection and the statements prepared on it.
type Connected = (Arc<Client>, Arc<Prepared>);

impl Shared {
    pub fn new(url: PostgresUrl, address: String, client: Client) -> Self {
        Shared {
            url,
            address,
            client: Mutex::new(Some((Arc::new(client), Arc::default()))),
        }
    }

    /// The connection, reopened if it had closed.
    async fn get(&self) -> Result<Connected> {
        let mut slot = self.client.lock().await;
        if let Some(pair) = slot.as_ref().filter(|(c, _)| !c.is_closed()) {
            return Ok(pair.clone());
        }
        let client = Arc::new(open(&self.url, &self.address, |_| {}, || {}).await?);
        let pair = (client, Arc::default());
        *slot = Some(pair.clone());
        Ok(pair)
    }

    /// Runs `sql` (prepared once per connection) with `params`.
    ///
    /// Cancellation: the statement may or may not have run on the server.
    pub async fn query(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let (client, prepared) = self.get().await?;
        let statement = prepared
            .statement(&client, sql)
            .await
            .map_err(|e| pg_error(&self.address, &e))?;
        client
            .query(&statement, params)
            .await
            .map_err(|e| pg_error(&self.address, &e))
    }
}
