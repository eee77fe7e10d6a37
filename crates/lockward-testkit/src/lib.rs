//! Real servers for tests, benchmarks and chaos runs: each starts as a
//! process on a free loopback port in a temporary folder, is waited for
//! until it answers, can be stopped, killed, paused and restarted, and is
//! killed when dropped. When the test thread is panicking, its log is
//! printed so the failure explains itself.
//!
//! A missing server binary is an error that names the install script.

use std::process::Command;

pub mod certs;
pub mod etcd;
pub mod kube;
pub mod mariadb;
mod port;
pub mod postgres;
mod process;
pub mod prometheus;
pub mod redis;
mod scratch;
pub mod sentinel;
pub mod zookeeper;

pub use etcd::EtcdCluster;
pub use kube::KubeApiServer;
pub use mariadb::MariadbServer;
pub use port::free_port;
pub use postgres::PostgresServer;
pub use process::{descendants, ServerProcess};
pub use prometheus::PrometheusServer;
pub use redis::{RedisCluster, RedisMasters, RedisOptions, RedisServer};
pub use scratch::data_dir;
pub use sentinel::RedisSentinels;
pub use zookeeper::ZookeeperEnsemble;

/// The script that installs every server binary the tests use.
pub const INSTALL_SCRIPT: &str = "scripts/install-test-deps.sh";

/// Finds `binary` on the PATH, or fails with a message naming the install
/// script.
pub fn require_binary(binary: &str) -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{binary}` is not installed; run {INSTALL_SCRIPT} (it installs every test server from Debian's packages)"
            )
        })
}

/// Where Debian's `faketime` package keeps the library it preloads.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// `program` with its clock shifted by `spec` (libfaketime's `+5s`) when
/// there is one. The library is preloaded into the program's own process:
/// the `faketime` command would fork and wait, so a kill -9 of the pid we
/// hold would leave the server running.
pub fn clocked_command(program: impl AsRef<std::ffi::OsStr>, spec: Option<&str>) -> Command {
    let mut cmd = Command::new(program);
    if let Some(spec) = spec {
        assert!(
            std::path::Path::new(LIBFAKETIME).is_file(),
            "libfaketime is not installed; run {INSTALL_SCRIPT} (it installs every test server from Debian's packages)"
        );
        cmd.env("LD_PRELOAD", LIBFAKETIME).env("FAKETIME", spec);
    }
    cmd
}

/// CPU time (user + system) process `pid` has used so far, from
/// `/proc/PID/stat`; `None` when it cannot be read.
pub fn cpu_time(pid: u32) -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After the command name: state is field 3; utime and stime are 14, 15.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(std::time::Duration::from_millis(ticks * 1000 / hz))
}
