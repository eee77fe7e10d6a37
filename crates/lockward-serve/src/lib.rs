//! `lockward serve`: a store's locks for every language, through one local
//! gRPC API (`lockward.v1`, in `proto/lockward/v1/lockward.proto`).
//!
//! One lease is one bidirectional stream: the client asks, the server
//! waits with the store's own wake-ups and answers with the fence; the
//! client renews on the stream (the server never renews on its behalf, so
//! a frozen client loses its lease as an in-process holder would) and the
//! server tells it when the store says the lease is gone. A stream that
//! ends without a release is released at once.

mod auth;
mod capacity;
mod codec;
mod dapr;
mod elections;
mod errors;
mod held;
mod keys;
mod lease;
mod limits;
mod listen;
mod rows;
mod service;
mod tls;

/// The API's messages and service, generated from the proto.
#[allow(missing_docs, clippy::all)]
pub mod pb {
    tonic::include_proto!("lockward.v1");
}

/// Dapr's lock calls, generated from their proto.
#[allow(missing_docs, clippy::all)]
pub mod pb_dapr {
    tonic::include_proto!("dapr.proto.runtime.v1");
}

pub use auth::{Token, TokenError};
pub use capacity::DEFAULT_MAX_LEASES;
pub use dapr::{DaprLocks, DEFAULT_DAPR_STORE, FENCE_HEADER};
pub use errors::{status_of, ERROR_KIND_KEY};
pub use listen::{Bound, Listen, ListenError, DEFAULT_LISTEN, MAX_STREAMS_PER_CONNECTION};
pub use service::Service;
pub use tls::{Tls, TlsError};

/// Serves the API for `store` on `listen` until `shutdown` resolves.
///
/// Cancellation: dropping the future stops accepting and ends every stream,
/// which releases every lease it held.
pub async fn serve(
    store: lockward::Store,
    listen: &Listen,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ListenError> {
    listen.serve(Service::new(store), shutdown).await
}

/// A duration in whole milliseconds, as the API carries them.
fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
