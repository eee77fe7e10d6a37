//! The API over one store: its shared state, and the `lockward.v1.Locks`
//! service.

use std::pin::Pin;
use std::sync::Arc;

use futures_util::Stream;
use lockward::Store;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::Token;
use crate::capacity::{Capacity, DEFAULT_MAX_LEASES};
use crate::dapr::{DaprLocks, DEFAULT_DAPR_STORE};
use crate::errors::{invalid, status_of};
use crate::lease::Opening;
use crate::pb::{self, locks_server::Locks};
use crate::rows::{info_of, row_of};
use crate::tls::Tls;

/// The API over `store`: every service of `lockward.v1`, and Dapr's lock
/// calls.
#[derive(Clone)]
pub struct Service {
    store: Store,
    /// Turns true when the server stops: every lease stream then releases
    /// what it holds and ends.
    stopping: watch::Receiver<bool>,
    stop: Arc<watch::Sender<bool>>,
    /// How many lease streams are being served now.
    leases: Arc<watch::Sender<usize>>,
    /// Every lease the daemon holds (streams and Dapr's locks), and the
    /// most it takes.
    capacity: Capacity,
    /// Dapr's lock calls, on the same store.
    dapr: DaprLocks,
    /// The token every call must carry, if one was set.
    token: Option<Token>,
    /// The listener's TLS identity, if one was set.
    tls: Option<Tls>,
    /// How long a new stream may take to send its first message.
    first_message: std::time::Duration,
}

/// How long a new stream may take to send its first message, by default.
const FIRST_MESSAGE: std::time::Duration = std::time::Duration::from_secs(10);

/// Counts one lease stream while it is served.
struct Serving(Arc<watch::Sender<usize>>);

impl Serving {
    fn start(count: &Arc<watch::Sender<usize>>) -> Serving {
        count.send_modify(|n| *n += 1);
        Serving(count.clone())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl Service {
    /// The service over `store`.
    pub fn new(store: Store) -> Service {
        let (stop, stopping) = watch::channel(false);
        let capacity = Capacity::new(DEFAULT_MAX_LEASES);
        Service {
            dapr: DaprLocks::new(store.clone(), DEFAULT_DAPR_STORE).admitted_by(capacity.clone()),
            store,
            stopping,
            stop: Arc::new(stop),
            leases: Arc::new(watch::channel(0).0),
            capacity,
            token: None,
            tls: None,
            first_message: FIRST_MESSAGE,
        }
    }

    /// Ends a stream that sends nothing within `within` of opening (10 s
    /// by default) with `INVALID_ARGUMENT`.
    pub fn first_message_within(mut self, within: std::time::Duration) -> Service {
        self.first_message = within;
        self
    }

    /// Holds at most `max` leases at once (lease streams and Dapr's locks
    /// together; [`DEFAULT_MAX_LEASES`](crate::DEFAULT_MAX_LEASES) unless
    /// set): one more is refused with `RESOURCE_EXHAUSTED` (lockward kind
    /// `TooManyLeases`) and the leases already held go on undisturbed.
    pub fn max_leases(self, max: usize) -> Service {
        self.capacity.set_max(max);
        self
    }

    /// Refuses every call that does not carry `token` (`authorization:
    /// Bearer TOKEN`, or Dapr's `dapr-api-token`) with `UNAUTHENTICATED`;
    /// the health checks answer without it.
    pub fn token(mut self, token: Token) -> Service {
        self.token = Some(token);
        self
    }

    /// Serves over TLS with `tls`. A TCP address other hosts can reach is
    /// served only with TLS and a [`token`](Self::token).
    pub fn tls(mut self, tls: Tls) -> Service {
        self.tls = Some(tls);
        self
    }

    /// Answers Dapr's lock calls to the lock store `name` (default
    /// `lockward`); calls naming another store are `INVALID_ARGUMENT`.
    pub fn dapr_store(mut self, name: impl Into<String>) -> Service {
        self.dapr = DaprLocks::new(self.store.clone(), name).admitted_by(self.capacity.clone());
        self
    }

    /// Dapr's lock calls on this service's store.
    pub fn dapr(&self) -> DaprLocks {
        self.dapr.clone()
    }

    /// How many lease streams are being served now.
    pub fn leases(&self) -> usize {
        *self.leases.borrow()
    }

    /// Resolves once no lease stream is served any more (after
    /// [`stop`](Self::stop): every lease was released), or after `within`.
    ///
    /// Cancellation: dropping the future changes nothing.
    pub async fn leases_ended(&self, within: std::time::Duration) {
        let mut count = self.leases.subscribe();
        let none_left = count.wait_for(|n| *n == 0);
        let _ = tokio::time::timeout(within, async { none_left.await.map(|_| ()) }).await;
    }

    /// Ends every lease stream: each releases what it holds (or stops
    /// waiting) and ends with `Unavailable`.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// The token calls must carry, if any.
    pub(crate) fn required_token(&self) -> Option<&Token> {
        self.token.as_ref()
    }

    /// The TLS identity to serve with, if any.
    pub(crate) fn tls_identity(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// The store every call goes to.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Serves one lease stream (a lease, a candidacy or a claim) in a task
    /// of its own, or refuses it when the daemon holds its most leases.
    pub(crate) fn lease_stream(
        &self,
        opening: Opening,
        requests: Streaming<pb::LeaseRequest>,
    ) -> Result<Response<Events>, Status> {
        let admitted = self.capacity.admit()?;
        let (events, received) = mpsc::channel(4);
        let store = self.store.clone();
        let stopping = self.stopping.clone();
        let serving = Serving::start(&self.leases);
        let first_within = self.first_message;
        tokio::spawn(async move {
            crate::lease::serve(opening, first_within, store, requests, events, stopping).await;
            drop((serving, admitted));
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(received))))
    }
}

/// The events of a lease stream, as tonic sends them.
pub(crate) type Events = Pin<Box<dyn Stream<Item = Result<pb::LeaseEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Locks for Service {
    type LeaseStream = Events;

    async fn lease(
        &self,
        request: Request<Streaming<pb::LeaseRequest>>,
    ) -> Result<Response<Events>, Status> {
        self.lease_stream(Opening::Acquire, request.into_inner())
    }

    async fn inspect(
        &self,
        request: Request<pb::InspectRequest>,
    ) -> Result<Response<pb::InspectResponse>, Status> {
        let name = request.into_inner().name;
        let row = self.store.inspect(&name).await.map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::InspectResponse {
            row: row.map(row_of),
        }))
    }

    async fn list(
        &self,
        request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        let prefix = request.into_inner().prefix;
        let rows = self.store.list(&prefix).await.map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::ListResponse {
            rows: rows.into_iter().map(row_of).collect(),
        }))
    }

    async fn force_unlock(
        &self,
        request: Request<pb::ForceUnlockRequest>,
    ) -> Result<Response<pb::ForceUnlockResponse>, Status> {
        let request = request.into_inner();
        let holder = request
            .holder
            .ok_or_else(|| invalid("holder: give the row Inspect showed"))?;
        let held_back = self
            .store
            .force_unlock(&request.name, &info_of(holder))
            .await
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::ForceUnlockResponse {
            held_back_ms: held_back.map(crate::millis),
        }))
    }
}
