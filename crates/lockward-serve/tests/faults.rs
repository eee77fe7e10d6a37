//! Bad clients against a real daemon (SQLite store): garbage bytes on the
//! socket, a stream that never asks, many streams on one connection, more
//! streams than the daemon takes. Each gets a clear error or is cut off,
//! the daemon stays up, and a holder on another connection is not
//! disturbed.

use std::time::Duration;

use futures_util::StreamExt;
use lockward_serve::pb::{
    self, lease_event::Event, lease_request::Request, locks_client::LocksClient,
};
use lockward_serve::pb_dapr::{dapr_client::DaprClient, TryLockRequest};
use lockward_serve::Service;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

mod daemon;
use daemon::{kind, Daemon, Lease};

/// A lease held a minute: the tests' leases outlast them without renewing.
fn acquire(name: &str) -> Request {
    Request::Acquire(pb::Acquire {
        names: vec![name.to_string()],
        ttl_ms: 60_000,
        ..Default::default()
    })
}

/// A holder on its own connection, which each fault must leave alone.
async fn bystander(daemon: &Daemon) -> (LocksClient<tonic::transport::Channel>, Lease) {
    let mut client = LocksClient::new(daemon.channel().await);
    let mut lease = Lease::open(acquire("bystander"), |r| client.lease(r)).await;
    lease.granted().await;
    (client, lease)
}

/// The bystander's lease still renews, so the fault left it alone.
async fn still_held(lease: &mut Lease) {
    lease
        .send(Request::Renew(pb::Renew { ttl_ms: 0, id: 1 }))
        .await;
    assert!(matches!(lease.next().await, Ok(Event::Renewed(_))));
}

#[tokio::test]
async fn garbage_bytes_on_the_socket_are_refused_and_nothing_else_is_disturbed() {
    let daemon = Daemon::start().await;
    let (_client, mut holder) = bystander(&daemon).await;
    for garbage in [
        b"\x00\x01\x02\x03 not http at all\r\n\r\n".to_vec(),
        (0..64 * 1024).map(|i| (i * 7 % 251) as u8).collect(),
        // An HTTP/2 preface followed by a frame of nonsense.
        [&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..], &[0xff; 64][..]].concat(),
    ] {
        let mut socket = tokio::net::TcpStream::connect(&daemon.address)
            .await
            .unwrap();
        let _ = socket.write_all(&garbage).await;
        let mut answer = Vec::new();
        // The daemon answers with an error or closes; it does not hang.
        let read = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer));
        assert!(
            read.await.is_ok(),
            "the daemon left a garbage connection open"
        );
    }
    still_held(&mut holder).await;
    let mut client = LocksClient::new(daemon.channel().await);
    let mut fresh = Lease::open(acquire("after-garbage"), |r| client.lease(r)).await;
    assert!(fresh.granted().await.fence > 0);
}

#[tokio::test]
async fn a_stream_that_never_asks_is_ended_with_a_clear_error() {
    let daemon = Daemon::start_with(|store| {
        Service::new(store).first_message_within(Duration::from_millis(300))
    })
    .await;
    let (_client, mut holder) = bystander(&daemon).await;
    let mut client = LocksClient::new(daemon.channel().await);
    let (_send, requests) = mpsc::channel::<pb::LeaseRequest>(1);
    let mut silent = client
        .lease(ReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    let ended = tokio::time::timeout(Duration::from_secs(5), silent.message())
        .await
        .expect("the daemon ends a silent stream");
    let status = ended.expect_err("an error, not an event");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(kind(&status), "InvalidArgument");
    assert!(status.message().contains("nothing asked"), "{status:?}");
    still_held(&mut holder).await;
}

#[tokio::test]
async fn ten_thousand_streams_on_one_connection_are_served_and_released() {
    let daemon = Daemon::start().await;
    let (_client, mut holder) = bystander(&daemon).await;
    let mut client = LocksClient::new(daemon.channel().await);
    let mut leases = Vec::new();
    for i in 0..10_000 {
        let mut lease = Lease::open(acquire(&format!("many/{i}")), |r| client.lease(r)).await;
        lease.granted().await;
        leases.push(lease);
    }
    still_held(&mut holder).await;
    // What a lease costs the daemon is measured on a release build, apart
    // from its client, by the Go benchmark (docs/benchmarks.md): a debug
    // build's memory says little.
    drop(leases);
    // Dropped streams are released at once: every name is free again.
    let mut again = Lease::open(
        Request::Acquire(pb::Acquire {
            names: vec!["many/0".into()],
            wait_ms: Some(3_000),
            ..Default::default()
        }),
        |r| client.lease(r),
    )
    .await;
    again.granted().await;
}

#[tokio::test]
async fn a_client_that_opens_a_hundred_thousand_streams_is_refused_past_the_daemons_limit() {
    const LIMIT: usize = 2_000;
    const STREAMS: usize = 100_000;
    let daemon = Daemon::start_with(|store| Service::new(store).max_leases(LIMIT)).await;
    let (_client, mut holder) = bystander(&daemon).await;
    // Eight connections, many streams in flight on each.
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(LocksClient::new(daemon.channel().await));
    }
    let opened = futures_util::stream::iter(0..STREAMS)
        .map(|i| {
            let mut client = clients[i % clients.len()].clone();
            async move {
                let (send, requests) = mpsc::channel(1);
                send.send(pb::LeaseRequest {
                    request: Some(acquire(&format!("flood/{i}"))),
                })
                .await
                .unwrap();
                match client.lease(ReceiverStream::new(requests)).await {
                    Ok(events) => {
                        let mut events = events.into_inner();
                        let event = events.message().await.unwrap().unwrap().event;
                        assert!(matches!(event, Some(Event::Granted(_))), "{event:?}");
                        Ok((send, events))
                    }
                    Err(status) => Err(status),
                }
            }
        })
        .buffer_unordered(1_000)
        .collect::<Vec<_>>()
        .await;
    let (held, refused): (Vec<_>, Vec<_>) = opened.into_iter().partition(Result::is_ok);
    // The bystander holds one place.
    assert_eq!(held.len(), LIMIT - 1);
    assert_eq!(refused.len(), STREAMS - (LIMIT - 1));
    for status in refused.iter().map(|r| r.as_ref().err().unwrap()) {
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert_eq!(kind(status), "TooManyLeases");
    }
    still_held(&mut holder).await;
    // Dapr's locks count too.
    let mut dapr = DaprClient::new(daemon.channel().await);
    let full = dapr
        .try_lock_alpha1(TryLockRequest {
            store_name: "lockward".into(),
            resource_id: "dapr-when-full".into(),
            lock_owner: "me".into(),
            expiry_in_seconds: 10,
        })
        .await
        .expect_err("refused while full");
    assert_eq!(full.code(), tonic::Code::ResourceExhausted);
    // Places free as streams end.
    drop(held);
    let mut client = LocksClient::new(daemon.channel().await);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (send, requests) = mpsc::channel(1);
        send.send(pb::LeaseRequest {
            request: Some(acquire("after-the-flood")),
        })
        .await
        .unwrap();
        match client.lease(ReceiverStream::new(requests)).await {
            Ok(events) => {
                let event = events.into_inner().message().await.unwrap().unwrap().event;
                assert!(matches!(event, Some(Event::Granted(_))), "{event:?}");
                break;
            }
            Err(status) if tokio::time::Instant::now() < deadline => {
                assert_eq!(status.code(), tonic::Code::ResourceExhausted);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(status) => panic!("no place freed within 10 s: {status:?}"),
        }
    }
    assert!(
        dapr.try_lock_alpha1(TryLockRequest {
            store_name: "lockward".into(),
            resource_id: "dapr-after".into(),
            lock_owner: "me".into(),
            expiry_in_seconds: 10,
        })
        .await
        .unwrap()
        .into_inner()
        .success
    );
}
