//! A redis-rs client for one endpoint of a URL: plain TCP, or TLS with the
//! URL's roots and client certificate, with the given settings (whose
//! credentials differ for a data node and a sentinel).

use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, RedisResult};

use super::url::RedisUrl;
use crate::url_parts::Endpoint;

/// The client of `endpoint`, in TLS when `url` is `rediss…`.
pub(super) fn for_endpoint(
    url: &RedisUrl,
    endpoint: &Endpoint,
    settings: RedisConnectionInfo,
) -> RedisResult<redis::Client> {
    let addr = if url.tls {
        ConnectionAddr::TcpTls {
            host: endpoint.host.clone(),
            port: endpoint.port,
            insecure: false,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(endpoint.host.clone(), endpoint.port)
    };
    let info = addr.into_connection_info()?.set_redis_settings(settings);
    #[cfg(feature = "redis-tls")]
    if url.tls {
        return redis::Client::build_with_tls(info, super::tls::certificates(url)?);
    }
    redis::Client::open(info)
}
