//! Free loopback ports, chosen below the kernel's ephemeral range.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;

/// Where ports are drawn from: below Linux's default ephemeral range
/// (32768–60999). A port the kernel handed out (`bind(0)`) can be taken
/// again as the source port of any outgoing connection while its server is
/// down, so a server restarted on it by a fault test finds it in use; a port
/// from here is never picked by the kernel on its own.
const RANGE: std::ops::Range<u16> = 20_000..32_000;

/// A TCP port on 127.0.0.1 that was free a moment ago. Servers started on
/// it retry with another port if it was taken meanwhile.
pub fn free_port() -> u16 {
    let span = u64::from(RANGE.end - RANGE.start);
    for _ in 0..1_000 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let port = RANGE.start + (hasher.finish() % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    // The range is crowded (thousands of servers): fall back to the kernel.
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}
