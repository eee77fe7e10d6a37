//! `--metrics ADDR`: lockward's metrics in the Prometheus text format at
//! `http://ADDR/metrics` for as long as the command runs. The endpoint has
//! no authentication: bind it to loopback or a network only Prometheus
//! reaches.

use std::net::SocketAddr;

use metrics_exporter_prometheus::PrometheusBuilder;

use crate::exit;

/// Bucket bounds of every histogram, in seconds.
const BUCKETS: [f64; 18] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 600.0, 3600.0,
];

/// Installs the recorder and starts serving on `addr` (on the current
/// runtime). An exit status when the address is bad or taken.
pub fn serve(addr: &str) -> Result<(), u8> {
    let socket: SocketAddr = addr.parse().map_err(|_| {
        eprintln!("lockward: --metrics {addr:?} is not an address such as 127.0.0.1:9464");
        exit::USAGE
    })?;
    PrometheusBuilder::new()
        .with_http_listener(socket)
        // Histograms (waits, hold times) from half a millisecond to an hour.
        .set_buckets(&BUCKETS)
        .and_then(|b| b.install())
        .map_err(|e| {
            eprintln!("lockward: cannot serve metrics on {socket}: {e}");
            exit::UNAVAILABLE
        })
}
