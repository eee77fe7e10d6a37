//! The lease stream against a real daemon on a SQLite store: what a client
//! of any language sees.

use std::time::{Duration, Instant};

use lockward_serve::pb::{
    self, lease_event::Event, lease_request::Request, locks_client::LocksClient,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

mod daemon;
use daemon::{kind, Daemon, Lease};

async fn client(daemon: &Daemon) -> LocksClient<Channel> {
    LocksClient::new(daemon.channel().await)
}

fn acquire(name: &str, ttl_ms: u64, wait_ms: Option<u64>) -> pb::Acquire {
    pb::Acquire {
        names: vec![name.to_string()],
        ttl_ms,
        wait_ms,
        ..Default::default()
    }
}

/// Opens a lease stream that asks for `acquire`.
async fn open(client: &mut LocksClient<Channel>, acquire: pb::Acquire) -> Lease {
    Lease::open(Request::Acquire(acquire), |r| client.lease(r)).await
}

#[tokio::test]
async fn fences_grow_and_renewals_move_the_deadline() {
    let daemon = Daemon::start().await;
    let mut client = client(&daemon).await;
    let mut first = open(&mut client, acquire("pay/1", 2_000, None)).await;
    let granted = first.granted().await;
    assert!(granted.fence > 0);
    assert!(
        granted.remaining_ms > 1_000 && granted.remaining_ms <= 2_000,
        "{granted:?}"
    );
    first
        .send(Request::Renew(pb::Renew {
            ttl_ms: 5_000,
            id: 7,
        }))
        .await;
    match first.next().await {
        Ok(Event::Renewed(r)) => {
            assert!(r.remaining_ms > 4_000, "{r:?}");
            assert_eq!(r.id, 7, "the answer names its renewal");
        }
        other => panic!("{other:?}"),
    }
    first.release().await;
    let mut second = open(&mut client, acquire("pay/1", 2_000, Some(0))).await;
    assert!(second.granted().await.fence > granted.fence);
    second.release().await;
}

#[tokio::test]
async fn a_held_lock_is_busy_and_its_waiter_is_woken_by_the_release() {
    let daemon = Daemon::start().await;
    let mut client = client(&daemon).await;
    let mut holder = open(&mut client, acquire("stock/9", 5_000, None)).await;
    holder.granted().await;
    let mut busy = open(&mut client, acquire("stock/9", 5_000, Some(0))).await;
    let refused = busy.next().await.expect_err("busy");
    assert_eq!(refused.code(), tonic::Code::Aborted);
    assert_eq!(kind(&refused), "Busy");
    let mut waiter = open(&mut client, acquire("stock/9", 5_000, None)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = Instant::now();
    holder.release().await;
    waiter.granted().await;
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "{:?}",
        released.elapsed()
    );
    waiter.release().await;
}

#[tokio::test]
async fn a_stream_that_ends_without_a_release_is_released_at_once() {
    let daemon = Daemon::start().await;
    let mut client = client(&daemon).await;
    let mut gone = open(&mut client, acquire("cron/a", 30_000, None)).await;
    gone.granted().await;
    drop(gone);
    let mut next = open(&mut client, acquire("cron/a", 30_000, Some(3_000))).await;
    next.granted().await;
    next.release().await;
}

#[tokio::test]
async fn a_client_that_stops_renewing_is_told_it_lost_and_the_name_passes_on() {
    let daemon = Daemon::start().await;
    let mut client = client(&daemon).await;
    let mut quiet = open(&mut client, acquire("job/x", 300, None)).await;
    let first = quiet.granted().await;
    match tokio::time::timeout(Duration::from_secs(3), quiet.next()).await {
        Ok(Ok(Event::Lost(lost))) => assert_eq!(lost.reason, pb::LostReason::Expired as i32),
        other => panic!("expected Lost, got {other:?}"),
    }
    let mut next = open(&mut client, acquire("job/x", 2_000, Some(3_000))).await;
    assert!(next.granted().await.fence > first.fence);
    next.release().await;
}

#[tokio::test]
async fn a_cancelled_wait_leaves_no_holder() {
    let daemon = Daemon::start().await;
    let mut client = client(&daemon).await;
    let mut holder = open(&mut client, acquire("m/1", 5_000, None)).await;
    holder.granted().await;
    let waiter = open(&mut client, acquire("m/1", 5_000, None)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(waiter);
    tokio::time::sleep(Duration::from_millis(100)).await;
    holder.release().await;
    let mut after = open(&mut client, acquire("m/1", 5_000, Some(0))).await;
    after.granted().await;
    after.release().await;
}

#[tokio::test]
async fn inspect_and_list_show_the_holder() {
    let daemon = Daemon::start().await;
    let mut client = client(&daemon).await;
    let mut holder = open(
        &mut client,
        pb::Acquire {
            label: "worker-7".into(),
            ..acquire("report/daily", 5_000, None)
        },
    )
    .await;
    let fence = holder.granted().await.fence;
    let row = client
        .inspect(pb::InspectRequest {
            name: "report/daily".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .row
        .expect("held");
    assert_eq!(row.fence, Some(fence));
    assert_eq!(row.label.as_deref(), Some("worker-7"));
    let rows = client
        .list(pb::ListRequest {
            prefix: "report/".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .rows;
    assert_eq!(rows.len(), 1);
    holder.release().await;
}

#[tokio::test]
async fn bad_requests_get_a_clear_error_and_the_daemon_stays_up() {
    let daemon = Daemon::start().await;
    let mut client = client(&daemon).await;
    let decade = 10 * 365 * 24 * 3600 * 1000;
    for (acquire, needle) in [
        (acquire("ok", decade, Some(0)), "ttl"),
        (acquire(&"n".repeat(1 << 20), 1_000, Some(0)), "name"),
        (pb::Acquire::default(), "names"),
        (
            pb::Acquire {
                kind: pb::Kind::Shared as i32,
                names: vec!["a".into(), "b".into()],
                ..Default::default()
            },
            "names",
        ),
    ] {
        let mut lease = open(&mut client, acquire).await;
        let status = lease.next().await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert_eq!(kind(&status), "InvalidArgument");
        assert!(status.message().contains(needle), "{status:?}");
    }
    // A lease that does not start with an Acquire.
    let (send, requests) = mpsc::channel(1);
    send.send(pb::LeaseRequest {
        request: Some(Request::Renew(pb::Renew { ttl_ms: 1, id: 1 })),
    })
    .await
    .unwrap();
    let mut events = client
        .lease(ReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    let status = events.message().await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    // Still serving.
    let mut fine = open(&mut client, acquire("after", 1_000, Some(0))).await;
    fine.granted().await;
    fine.release().await;
}
