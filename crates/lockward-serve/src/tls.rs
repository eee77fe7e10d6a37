//! TLS for the daemon's listener: its certificate chain and private key,
//! read and checked once, at start.

use std::path::Path;

use tonic::transport::{Identity, Server, ServerTlsConfig};

/// The daemon's TLS identity. Its `Debug` shows neither the key nor the
/// certificate.
#[derive(Clone)]
pub struct Tls(ServerTlsConfig);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls(…)")
    }
}

/// Why a certificate and key cannot be served with.
#[derive(Debug)]
pub struct TlsError(String);

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

impl Tls {
    /// Reads the certificate chain at `cert` and the private key at `key`
    /// (both PEM) and checks that they make a server identity.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Tls, TlsError> {
        let read = |what: &str, path: &Path| {
            std::fs::read(path)
                .map_err(|e| TlsError(format!("cannot read the {what} {}: {e}", path.display())))
        };
        let identity = Identity::from_pem(read("certificate", cert)?, read("key", key)?);
        // rustls needs one process-wide crypto provider, and a build with
        // more than one (other crates enable theirs) has no default.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = ServerTlsConfig::new().identity(identity);
        // The pair is parsed when a server takes it: take it now, so that
        // a bad file stops the daemon at start, not at its first client.
        Server::builder().tls_config(config.clone()).map_err(|e| {
            TlsError(format!(
                "{} and {} are not a usable certificate and key: {e}",
                cert.display(),
                key.display()
            ))
        })?;
        Ok(Tls(config))
    }

    /// The configuration a server takes.
    pub(crate) fn config(&self) -> ServerTlsConfig {
        self.0.clone()
    }
}
