//! A daemon over TLS: a client that trusts its CA is served (with the
//! token), a plaintext client is not; an address other hosts reach is
//! served only with TLS and a token; a bad certificate stops it at start.

use lockward_serve::pb::{locks_client::LocksClient, InspectRequest};
use lockward_serve::{Listen, ListenError, Service, Tls, Token};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use tonic::Request;

const SECRET: &str = "s3cret-token-for-tls-tests";

/// A CA and a certificate for 127.0.0.1 signed by it, in a fresh folder.
fn certificates() -> (tempfile::TempDir, Tls) {
    let dir = tempfile::tempdir().unwrap();
    lockward_testkit::certs::make_certificates(dir.path());
    let tls = Tls::from_files(
        &dir.path().join("server.pem"),
        &dir.path().join("server.key"),
    )
    .unwrap();
    (dir, tls)
}

async fn store() -> (tempfile::TempDir, lockward::Store) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("locks.db").display());
    (dir, lockward::Store::open(&url).await.unwrap())
}

fn inspect() -> Request<InspectRequest> {
    let mut request = Request::new(InspectRequest { name: "a".into() });
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {SECRET}").parse().unwrap());
    request
}

#[tokio::test]
async fn a_client_that_trusts_the_ca_is_served_and_plaintext_is_not() {
    let (certs, tls) = certificates();
    let (_data, store) = store().await;
    let service = Service::new(store)
        .tls(tls)
        .token(Token::new(SECRET).unwrap());
    let bound = Listen::parse("127.0.0.1:0").unwrap().bind().await.unwrap();
    let address = bound.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(bound.serve(service, async {
        let _ = stopped.await;
    }));

    let ca = std::fs::read(certs.path().join("ca.pem")).unwrap();
    let secure = Channel::from_shared(format!("https://{address}"))
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let answer = LocksClient::new(secure).inspect(inspect()).await.unwrap();
    assert!(answer.into_inner().row.is_none());

    // The same daemon, asked without TLS: no answer.
    let plain = Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await;
    if let Ok(plain) = plain {
        let refused = LocksClient::new(plain).inspect(inspect()).await;
        assert!(refused.is_err(), "a plaintext call was served: {refused:?}");
    }
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_address_other_hosts_reach_needs_tls_and_a_token() {
    let (_certs, tls) = certificates();
    let (_data, store) = store().await;
    let exposed = Listen::parse("0.0.0.0:0").unwrap();
    for service in [
        Service::new(store.clone()),
        Service::new(store.clone()).token(Token::new(SECRET).unwrap()),
        Service::new(store.clone()).tls(tls.clone()),
    ] {
        let refused = exposed.check(&service).unwrap_err();
        assert!(matches!(refused, ListenError::Invalid(_)), "{refused}");
        assert!(refused.to_string().contains("--tls-cert"), "{refused}");
    }
    // Serving it anyway is refused before anything listens.
    let served = lockward_serve::serve(store.clone(), &exposed, std::future::ready(())).await;
    assert!(matches!(served, Err(ListenError::Invalid(_))), "{served:?}");
    let both = Service::new(store.clone())
        .tls(tls)
        .token(Token::new(SECRET).unwrap());
    exposed.check(&both).unwrap();
    // The loopback and a unix socket need neither.
    let loopback = Listen::parse("127.0.0.1:0").unwrap();
    loopback.check(&Service::new(store.clone())).unwrap();
    let socket = Listen::parse("unix:///tmp/lockward-tls-test.sock").unwrap();
    socket.check(&Service::new(store)).unwrap();
}

#[test]
fn a_missing_or_bad_certificate_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing =
        Tls::from_files(&dir.path().join("none.pem"), &dir.path().join("none.key")).unwrap_err();
    assert!(
        missing.to_string().contains("cannot read the certificate"),
        "{missing}"
    );
    std::fs::write(dir.path().join("bad.pem"), "not a certificate").unwrap();
    std::fs::write(dir.path().join("bad.key"), "not a key").unwrap();
    let bad =
        Tls::from_files(&dir.path().join("bad.pem"), &dir.path().join("bad.key")).unwrap_err();
    assert!(
        bad.to_string().contains("not a usable certificate and key"),
        "{bad}"
    );
    assert!(
        !bad.to_string().contains("not a key"),
        "the key's text in {bad}"
    );
}
