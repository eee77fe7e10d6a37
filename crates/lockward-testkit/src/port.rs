//! Free loopback ports.

use std::net::TcpListener;

/// A TCP port on 127.0.0.1 that was free a moment ago. Servers started on
/// it retry with another port if it was taken meanwhile.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}
