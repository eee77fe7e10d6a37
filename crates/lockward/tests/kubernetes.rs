//! The Kubernetes Lease store on a real kube-apiserver, beyond the
//! conformance suite: expiry observed on the local clock as client-go
//! observes it, names that read back from Lease names, records as
//! ConfigMaps, and clear errors.
#![cfg(feature = "kubernetes")]

use std::process::Stdio;
use std::time::{Duration, Instant};

use lockward::{Error, LockOptions, Renewal, Store};
use lockward_testkit::KubeApiServer;

/// One test at a time: each starts its own API server, and the timing
/// checks should not share two cores with several of them.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs a test's body on a runtime of its own, as `#[tokio::test]` would.
fn on_runtime(body: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(body);
}

fn opts(ttl: Duration) -> LockOptions {
    LockOptions::new().ttl(ttl).renewal(Renewal::Off)
}

/// Writes a Lease held by `holder` whose `renewTime` is `renew` (RFC 3339).
fn apply_lease(server: &KubeApiServer, name: &str, holder: &str, renew: &str, seconds: u32) {
    let manifest = format!(
        r#"{{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{{"name":"{name}","namespace":"default"}},
"spec":{{"holderIdentity":"{holder}","leaseDurationSeconds":{seconds},"acquireTime":"{renew}","renewTime":"{renew}","leaseTransitions":4}}}}"#
    );
    let mut apply = server
        .kubectl_command(&["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    apply
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    assert!(apply.wait().unwrap().success(), "kubectl apply failed");
}

#[test]
fn expiry_is_observed_not_read_from_renew_time() {
    let _turn = one_at_a_time();
    on_runtime(expiry_is_observed_not_read_from_renew_time_on_a_server());
}

async fn expiry_is_observed_not_read_from_renew_time_on_a_server() {
    let server = KubeApiServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    // A holder whose renewTime is decades old, as a host with a wrong
    // clock (or a dead one) would leave it: lockward does not compare that
    // time with its clock, it waits a whole duration from first seeing it.
    apply_lease(
        &server,
        "lockward-stale",
        "ghost",
        "2000-01-01T00:00:00.000000Z",
        2,
    );
    let began = Instant::now();
    assert!(matches!(
        store
            .try_acquire("stale", &opts(Duration::from_secs(5)))
            .await,
        Err(Error::Busy { .. })
    ));
    let info = store
        .inspect("stale")
        .await
        .unwrap()
        .expect("held by ghost");
    assert_eq!(info.label.as_deref(), Some("ghost"));
    assert_eq!(info.owner, "ghost");
    assert_eq!(
        info.fence, None,
        "a holder lockward did not write has no fence"
    );
    let guard = store
        .acquire(
            "stale",
            &opts(Duration::from_secs(5)).wait(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_millis(1_900),
        "took it after {waited:?}"
    );
    assert!(waited < Duration::from_secs(4), "took {waited:?}");
    guard.release().await.unwrap();

    // A renewal resets the count: a holder with a clock far ahead is not
    // taken over early either, and one that keeps renewing keeps it.
    apply_lease(
        &server,
        "lockward-renewed",
        "ghost",
        "2100-01-01T00:00:00.000000Z",
        2,
    );
    let waiter = store.clone();
    let began = Instant::now();
    let taken = tokio::spawn(async move {
        waiter
            .acquire(
                "renewed",
                &opts(Duration::from_secs(5)).wait(Duration::from_secs(20)),
            )
            .await
            .map(|g| (Instant::now(), g))
    });
    for i in 1..=3 {
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        let at = format!("2100-01-01T00:00:0{i}.000000Z");
        apply_lease(&server, "lockward-renewed", "ghost", &at, 2);
    }
    let renewals_done = Instant::now();
    let (got, guard) = taken.await.unwrap().unwrap();
    assert!(got >= renewals_done, "taken while the holder renewed");
    // Not before a whole duration after the last renewal was written.
    assert!(got.duration_since(renewals_done) >= Duration::from_millis(1_900));
    assert!(got.duration_since(began) >= Duration::from_millis(4_900));
    guard.release().await.unwrap();
}

#[test]
fn names_read_back_and_records_are_config_maps() {
    let _turn = one_at_a_time();
    on_runtime(names_read_back_and_records_are_config_maps_on_a_server());
}

async fn names_read_back_and_records_are_config_maps_on_a_server() {
    let server = KubeApiServer::start();
    let store = Store::open(&server.url()).await.unwrap();
    let names = ["orders/42", "Payments", "a--b", "app.example.com", "é"];
    let mut guards = Vec::new();
    for name in names {
        guards.push(
            store
                .try_acquire(name, &opts(Duration::from_secs(30)))
                .await
                .unwrap(),
        );
    }
    let listed: Vec<String> = store
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    let mut expected: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    expected.sort();
    assert_eq!(listed, expected);
    let leases = server.kubectl(&["get", "lease", "-o", "name"]);
    let leases = String::from_utf8_lossy(&leases.stdout).to_string();
    for object in [
        "lockward-orders--2f42",
        "lockward---50ayments",
        "lockward-a--2d-b",
        "lockward-app.example.com",
    ] {
        assert!(leases.contains(object), "{object} not in {leases}");
    }
    for guard in guards {
        guard.release().await.unwrap();
    }
    assert!(store.list("").await.unwrap().is_empty());

    // A lock name too long for a Lease name is refused before any request.
    let long = "/".repeat(100);
    assert!(matches!(
        store
            .try_acquire(&long, &opts(Duration::from_secs(5)))
            .await,
        Err(Error::InvalidArgument { what: "name", .. })
    ));

    // Records: one ConfigMap each, expiry in an annotation.
    let once = lockward::recipe::Idempotency::new(store.clone());
    let first = once
        .run("charge/7", || async { Ok::<_, Error>("done".to_string()) })
        .await
        .unwrap();
    assert!(
        matches!(first, lockward::recipe::Idempotent::Ran(ref r) if r == "done"),
        "{first:?}"
    );
    let again = once
        .run("charge/7", || async { Ok::<_, Error>("twice".to_string()) })
        .await
        .unwrap();
    assert!(
        matches!(again, lockward::recipe::Idempotent::Stored(ref r) if r == "done"),
        "{again:?}"
    );
    let maps = server.kubectl(&["get", "configmap", "-o", "name"]);
    let maps = String::from_utf8_lossy(&maps.stdout).to_string();
    assert!(maps.contains("lockward-r-"), "{maps}");
}
