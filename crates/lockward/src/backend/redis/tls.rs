//! TLS to Redis: the roots and client certificate a `rediss://` URL names,
//! for one server, a cluster and Sentinel alike.

use redis::{ClientTlsConfig, RedisResult, TlsCertificates};

use super::url::RedisUrl;

/// The roots and client certificate the URL names, read from their files.
pub fn certificates(url: &RedisUrl) -> RedisResult<TlsCertificates> {
    // rustls needs one process-wide crypto provider; a second install
    // (by us or by the application) is refused harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| {
            redis::RedisError::from(std::io::Error::new(
                e.kind(),
                format!("cannot read {}: {e}", path.display()),
            ))
        })
    };
    let root_cert = url.ca.as_deref().map(read).transpose()?;
    let client_tls = match &url.client_cert {
        Some((cert, key)) => Some(ClientTlsConfig {
            client_cert: read(cert)?,
            client_key: read(key)?,
        }),
        None => None,
    };
    Ok(TlsCertificates {
        client_tls,
        root_cert,
    })
}
