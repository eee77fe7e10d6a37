//! A real daemon on a fresh SQLite store for the tests, and a lease stream
//! as any client holds one.

#![allow(dead_code)] // each test file uses its part

use std::future::Future;

use lockward_serve::pb::{self, lease_event::Event, lease_request::Request};
use lockward_serve::{Listen, Service, ERROR_KIND_KEY};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::Streaming;

/// A daemon on a fresh SQLite store, on a free loopback port; it stops
/// when dropped.
pub struct Daemon {
    pub address: String,
    pub store: lockward::Store,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Daemon {
    /// The daemon with the default settings.
    pub async fn start() -> Daemon {
        Daemon::start_with(Service::new).await
    }

    /// The daemon, its service set up by `service`.
    pub async fn start_with(service: impl FnOnce(lockward::Store) -> Service) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("locks.db").display());
        let store = lockward::Store::open(&url).await.unwrap();
        let bound = Listen::parse("127.0.0.1:0").unwrap().bind().await.unwrap();
        let address = bound.local_addr().unwrap().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(bound.serve(service(store.clone()), async {
            let _ = stopped.await;
        }));
        Daemon {
            address,
            store,
            _dir: dir,
            stop: Some(stop),
        }
    }

    /// A connection to the daemon.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.address))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One lease stream (a lease, a candidacy or a claim), as a client holds
/// it.
pub struct Lease {
    send: mpsc::Sender<pb::LeaseRequest>,
    events: Streaming<pb::LeaseEvent>,
}

impl Lease {
    /// Opens a stream with `call` (e.g. `|r| client.lease(r)`) and sends
    /// `first`.
    pub async fn open<F, Fut>(first: Request, call: F) -> Lease
    where
        F: FnOnce(ReceiverStream<pb::LeaseRequest>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Streaming<pb::LeaseEvent>>, tonic::Status>>,
    {
        let (send, requests) = mpsc::channel(4);
        send.send(pb::LeaseRequest {
            request: Some(first),
        })
        .await
        .unwrap();
        let events = call(ReceiverStream::new(requests))
            .await
            .unwrap()
            .into_inner();
        Lease { send, events }
    }

    /// The daemon's next event, or the status that ended the stream.
    pub async fn next(&mut self) -> Result<Event, tonic::Status> {
        match self.events.message().await {
            Ok(Some(pb::LeaseEvent { event: Some(event) })) => Ok(event),
            Ok(other) => panic!("unexpected {other:?}"),
            Err(status) => Err(status),
        }
    }

    /// The next event, which must be Granted.
    pub async fn granted(&mut self) -> pb::Granted {
        match self.next().await {
            Ok(Event::Granted(g)) => g,
            other => panic!("expected Granted, got {other:?}"),
        }
    }

    pub async fn send(&self, request: Request) {
        self.send
            .send(pb::LeaseRequest {
                request: Some(request),
            })
            .await
            .unwrap();
    }

    /// Releases, and checks the daemon confirms it.
    pub async fn release(mut self) {
        self.send(Request::Release(pb::Release {})).await;
        assert!(matches!(self.next().await, Ok(Event::Released(_))));
    }
}

/// The lockward error kind a status names.
pub fn kind(status: &tonic::Status) -> &str {
    status
        .metadata()
        .get(ERROR_KIND_KEY)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}
