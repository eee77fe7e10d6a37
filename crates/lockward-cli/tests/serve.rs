//! `lockward serve` as a process: a lease taken through its API and the
//! `lockward run` of the shell exclude each other both ways, on a unix
//! socket (the default) and on loopback TCP; SIGTERM stops it and frees
//! what it held; its token, Dapr store name and socket group apply.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::lockward;
use lockward_serve::pb::{
    self, lease_event::Event, lease_request::Request, locks_client::LocksClient,
};
use lockward_serve::pb_dapr::{dapr_client::DaprClient, TryLockRequest};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

/// A `lockward serve` process and the address it printed.
struct Served {
    child: Child,
    on: String,
}

fn serve(store: &str, listen: &str) -> Served {
    serve_with(store, listen, &[])
}

/// `lockward serve` with more options.
fn serve_with(store: &str, listen: &str, options: &[&str]) -> Served {
    let mut child = Command::new(lockward())
        .args(["--store", store, "serve", "--listen", listen])
        .args(options)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("lockward serve starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let on = first
        .trim()
        .rsplit_once(" on ")
        .map(|(_, on)| on.to_string())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    Served { child, on }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn connect(on: &str) -> LocksClient<Channel> {
    LocksClient::new(channel(on).await)
}

/// A connection to the daemon at `on` (`unix://PATH` or `IP:PORT`).
async fn channel(on: &str) -> Channel {
    match on.strip_prefix("unix://") {
        Some(path) => {
            let path = path.to_string();
            Endpoint::from_static("http://lockward")
                .connect_with_connector(tower::service_fn(move |_| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                    }
                }))
                .await
                .unwrap()
        }
        None => Channel::from_shared(format!("http://{on}"))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    }
}

/// Takes `name` through the API; the sender keeps the lease's stream open.
async fn take(
    client: &mut LocksClient<Channel>,
    name: &str,
    wait_ms: Option<u64>,
) -> Result<
    (
        mpsc::Sender<pb::LeaseRequest>,
        tonic::Streaming<pb::LeaseEvent>,
        u64,
    ),
    tonic::Status,
> {
    let (send, requests) = mpsc::channel(4);
    send.send(pb::LeaseRequest {
        request: Some(Request::Acquire(pb::Acquire {
            names: vec![name.into()],
            ttl_ms: 10_000,
            wait_ms,
            ..Default::default()
        })),
    })
    .await
    .unwrap();
    let mut events = client
        .lease(ReceiverStream::new(requests))
        .await?
        .into_inner();
    match events.message().await? {
        Some(pb::LeaseEvent {
            event: Some(Event::Granted(g)),
        }) => Ok((send, events, g.fence)),
        other => panic!("expected Granted, got {other:?}"),
    }
}

fn run_no_wait(store: &str, name: &str) -> i32 {
    Command::new(lockward())
        .args(["--store", store, "run", name, "--no-wait", "--", "true"])
        .status()
        .unwrap()
        .code()
        .unwrap_or(-1)
}

async fn api_and_shell_exclude_each_other(store: &str, on: &str) {
    let mut client = connect(on).await;
    let (send, mut events, fence) = take(&mut client, "deploy", None).await.unwrap();
    assert!(fence > 0);
    // Held through the API: the shell's run is refused (75).
    assert_eq!(run_no_wait(store, "deploy"), 75);
    send.send(pb::LeaseRequest {
        request: Some(Request::Release(pb::Release {})),
    })
    .await
    .unwrap();
    assert!(matches!(
        events.message().await.unwrap(),
        Some(pb::LeaseEvent {
            event: Some(Event::Released(_))
        })
    ));
    assert_eq!(run_no_wait(store, "deploy"), 0);
    // Held by the shell: the API's try is refused with Busy.
    let mut holder = Command::new(lockward())
        .args(["--store", store, "run", "deploy", "--", "sleep", "5"])
        .spawn()
        .unwrap();
    let mut refused = None;
    for _ in 0..50 {
        match take(&mut client, "deploy", Some(0)).await {
            Err(status) => {
                refused = Some(status);
                break;
            }
            // Not yet taken by the shell: give it back, look again.
            Ok((send, _, _)) => drop(send),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = refused.expect("the shell's lock refused the API");
    assert_eq!(
        refused
            .metadata()
            .get(lockward_serve::ERROR_KIND_KEY)
            .unwrap(),
        "Busy"
    );
    let _ = holder.kill();
    let _ = holder.wait();
}

#[tokio::test]
async fn over_a_unix_socket_the_api_and_the_shell_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("locks.db").display());
    let socket = dir.path().join("run/lockward.sock");
    let served = serve(&store, &format!("unix://{}", socket.display()));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660, "the socket is for its owner and group");
    api_and_shell_exclude_each_other(&store, &served.on).await;
}

#[tokio::test]
async fn on_loopback_tcp_the_api_and_the_shell_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("locks.db").display());
    let served = serve(&store, "127.0.0.1:0");
    api_and_shell_exclude_each_other(&store, &served.on).await;
}

#[tokio::test]
async fn sigterm_stops_the_daemon_and_frees_what_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("locks.db").display());
    let mut served = serve(&store, "127.0.0.1:0");
    let mut client = connect(&served.on).await;
    let (_send, _events, _) = take(&mut client, "nightly", None).await.unwrap();
    assert_eq!(run_no_wait(&store, "nightly"), 75);
    common::signal(served.child.id(), libc::SIGTERM);
    let status = common::wait_exit(&mut served.child, Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    assert_eq!(
        run_no_wait(&store, "nightly"),
        0,
        "the lease went with the daemon"
    );
}

#[tokio::test]
async fn the_token_the_dapr_store_name_and_the_group_are_applied() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("locks.db").display());
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "a-secret-of-24-characters\n").unwrap();
    // Root may give the socket to any group; anyone else, to their own.
    let group = if unsafe { libc::geteuid() } == 0 {
        "daemon".to_string()
    } else {
        unsafe { libc::getegid() }.to_string()
    };
    let socket = dir.path().join("lockward.sock");
    let served = serve_with(
        &store,
        &format!("unix://{}", socket.display()),
        &[
            "--dapr-store",
            "locks",
            "--token-file",
            token_file.to_str().unwrap(),
            "--group",
            &group,
        ],
    );
    use std::os::unix::fs::MetadataExt;
    let gid = std::fs::metadata(&socket).unwrap().gid();
    if group == "daemon" {
        assert_eq!(gid, 1, "the socket belongs to the group daemon");
    } else {
        assert_eq!(gid.to_string(), group);
    }
    let mut dapr = DaprClient::new(channel(&served.on).await);
    let ask = |token: Option<&str>| {
        let mut request = tonic::Request::new(TryLockRequest {
            store_name: "locks".into(),
            resource_id: "orders".into(),
            lock_owner: "a".into(),
            expiry_in_seconds: 10,
        });
        if let Some(token) = token {
            request
                .metadata_mut()
                .insert("dapr-api-token", token.parse().unwrap());
        }
        request
    };
    let refused = dapr.try_lock_alpha1(ask(None)).await.expect_err("no token");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let locked = dapr
        .try_lock_alpha1(ask(Some("a-secret-of-24-characters")))
        .await
        .expect("the store is named locks, and the token is right");
    assert!(locked.into_inner().success);
}

#[tokio::test]
async fn max_leases_bounds_what_the_daemon_holds() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("locks.db").display());
    let served = serve_with(&store, "127.0.0.1:0", &["--max-leases", "1"]);
    let mut client = connect(&served.on).await;
    let held = take(&mut client, "first", None).await.expect("one place");
    let refused = take(&mut client, "second", None)
        .await
        .expect_err("no second place");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert_eq!(
        refused
            .metadata()
            .get(lockward_serve::ERROR_KIND_KEY)
            .unwrap(),
        "TooManyLeases"
    );
    assert!(refused.message().contains("--max-leases"), "{refused:?}");
    drop(held);
    // The place is free once the stream ends.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while take(&mut client, "second", None).await.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the place was not freed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let zero = Command::new(lockward())
        .args(["--store", "memory://", "serve", "--listen", "127.0.0.1:0"])
        .args(["--max-leases", "0"])
        .output()
        .unwrap();
    assert_eq!(zero.status.code(), Some(64));
    let err = String::from_utf8_lossy(&zero.stderr);
    assert!(err.contains("--max-leases"), "{err}");
}

#[test]
fn a_missing_token_file_or_a_group_for_tcp_is_a_usage_error() {
    let missing = Command::new(lockward())
        .args(["--store", "memory://", "serve", "--listen", "127.0.0.1:0"])
        .args(["--token-file", "/nonexistent/token"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(64));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("/nonexistent/token"), "{err}");
    let group = Command::new(lockward())
        .args(["--store", "memory://", "serve", "--listen", "127.0.0.1:0"])
        .args(["--group", "daemon"])
        .output()
        .unwrap();
    assert_eq!(group.status.code(), Some(64));
    let err = String::from_utf8_lossy(&group.stderr);
    assert!(err.contains("unix socket"), "{err}");
}

#[test]
fn an_address_other_hosts_reach_is_refused() {
    let out = Command::new(lockward())
        .args(["--store", "memory://", "serve", "--listen", "0.0.0.0:7443"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("other hosts"), "{err}");
    // A token alone is not enough: anyone on the path would read it.
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "a-token-of-twenty-chars\n").unwrap();
    let out = Command::new(lockward())
        .args(["--store", "memory://", "serve", "--listen", "0.0.0.0:7443"])
        .args(["--token-file", token_file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-cert"), "{err}");
}

#[test]
fn a_certificate_without_its_key_or_a_bad_one_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("server.pem");
    let key = dir.path().join("server.key");
    std::fs::write(&cert, "not a certificate").unwrap();
    std::fs::write(&key, "not a key").unwrap();
    let alone = Command::new(lockward())
        .args(["--store", "memory://", "serve", "--listen", "127.0.0.1:0"])
        .args(["--tls-cert", cert.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(alone.status.code(), Some(64));
    let err = String::from_utf8_lossy(&alone.stderr);
    assert!(err.contains("--tls-key"), "{err}");
    let bad = Command::new(lockward())
        .args(["--store", "memory://", "serve", "--listen", "127.0.0.1:0"])
        .args(["--tls-cert", cert.to_str().unwrap()])
        .args(["--tls-key", key.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(64));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("not a usable certificate and key"), "{err}");
}
