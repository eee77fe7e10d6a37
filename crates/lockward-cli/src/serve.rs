//! `lockward serve`: the store's locks for programs in any language, over
//! a local gRPC API (`lockward.v1`): one lease per stream, renewed by the
//! client, released when the stream ends; and Dapr's lock calls on the
//! same port, for every Dapr SDK.

use lockward::Store;
use lockward_serve::{
    Listen, Service, Tls, Token, DEFAULT_DAPR_STORE, DEFAULT_LISTEN, DEFAULT_MAX_LEASES,
};

use crate::exit;
use crate::stop::StopRequest;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Where to listen: unix://PATH (a socket only its owner and group may
    /// use) or IP:PORT (127.0.0.1:7443; port 0 picks one). An address other
    /// hosts reach is served only with --tls-cert, --tls-key and
    /// --token-file.
    #[arg(long, env = "LOCKWARD_LISTEN", default_value = DEFAULT_LISTEN)]
    listen: String,
    /// The lock store name Dapr's SDKs must ask for (their store_name);
    /// calls naming another are refused.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_DAPR_STORE)]
    dapr_store: String,
    /// A file holding a secret (16 characters or more) that every call
    /// must carry: `authorization: Bearer TOKEN`, or Dapr's
    /// `dapr-api-token` (set DAPR_API_TOKEN for Dapr's SDKs).
    #[arg(long, value_name = "PATH", env = "LOCKWARD_TOKEN_FILE")]
    token_file: Option<std::path::PathBuf>,
    /// Serve over TLS with this certificate chain (PEM); with --tls-key.
    #[arg(
        long,
        value_name = "PATH",
        requires = "tls_key",
        env = "LOCKWARD_TLS_CERT"
    )]
    tls_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(
        long,
        value_name = "PATH",
        requires = "tls_cert",
        env = "LOCKWARD_TLS_KEY"
    )]
    tls_key: Option<std::path::PathBuf>,
    /// The group whose members may use the unix socket (mode 0660).
    #[arg(long, value_name = "GROUP")]
    group: Option<String>,
    /// The most leases held at once, for all clients together (about
    /// 13 KB of memory each); one more is refused with RESOURCE_EXHAUSTED.
    #[arg(
        long,
        value_name = "N",
        env = "LOCKWARD_MAX_LEASES",
        default_value_t = DEFAULT_MAX_LEASES as u32,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    max_leases: u32,
}

/// Serves until SIGINT or SIGTERM; every lease still held is released
/// when its stream ends with the server.
pub async fn serve(store: &Store, args: ServeArgs) -> u8 {
    let listen = match Listen::parse(&args.listen) {
        Ok(listen) => listen,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::USAGE;
        }
    };
    let mut service = Service::new(store.clone())
        .dapr_store(args.dapr_store)
        .max_leases(args.max_leases as usize);
    if let Some(path) = &args.token_file {
        match Token::from_file(path) {
            Ok(token) => service = service.token(token),
            Err(e) => {
                eprintln!("lockward: --token-file: {e}");
                return exit::USAGE;
            }
        }
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        match Tls::from_files(cert, key) {
            Ok(tls) => service = service.tls(tls),
            Err(e) => {
                eprintln!("lockward: --tls-cert/--tls-key: {e}");
                return exit::USAGE;
            }
        }
    }
    if let Err(e) = listen.check(&service) {
        eprintln!("lockward: {e}");
        return exit::USAGE;
    }
    let Some(mut stop) = StopRequest::install() else {
        eprintln!("lockward: cannot install signal handlers");
        return exit::SOFTWARE;
    };
    let bound = match listen.bind().await {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!("lockward: {e}");
            return exit::UNAVAILABLE;
        }
    };
    if let Some(group) = &args.group {
        if let Err(e) = bound.give_to_group(group) {
            eprintln!("lockward: {e}");
            return exit::USAGE;
        }
    }
    // The first line says where it listens (the port, when 0 was asked).
    match bound.local_addr() {
        Some(addr) => println!("lockward: serving {} on {addr}", store.address()),
        None => println!("lockward: serving {} on {listen}", store.address()),
    }
    let shutdown = async move {
        let signal = stop.requested().await;
        eprintln!("lockward: {signal}: stopping");
    };
    match bound.serve(service, shutdown).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("lockward: {e}");
            exit::SOFTWARE
        }
    }
}
