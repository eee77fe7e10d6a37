//! `lockward-testserver STORE`: starts one store's server the way the tests
//! do, prints its store URL as the first line of stdout, and runs until
//! stdin closes or it gets SIGTERM or SIGINT, then stops the server and
//! removes its files. For trying a store by hand:
//!
//! ```text
//! cargo run -p lockward-testkit --bin lockward-testserver -- k8s
//! ```

use std::any::Any;
use std::io::{Read, Write};
use std::sync::mpsc;

use lockward_testkit::{
    EtcdCluster, KubeApiServer, MariadbServer, PostgresServer, RedisCluster, RedisMasters,
    RedisSentinels, RedisServer, ZookeeperEnsemble,
};

const STORES: &str =
    "redis, redis-cluster, redis-sentinel, redlock, etcd, zookeeper, postgres, mariadb, k8s";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [store] = args.as_slice() else {
        eprintln!("usage: lockward-testserver STORE   (one of: {STORES})");
        std::process::exit(2);
    };
    // Blocked before any thread starts, so every thread inherits the mask
    // and only the waiting thread below takes these signals.
    let signals = block_signals(&[libc::SIGTERM, libc::SIGINT]);
    let (server, url): (Box<dyn Any>, String) = match store.as_str() {
        "redis" => started(RedisServer::start(), RedisServer::url),
        "redis-cluster" => started(RedisCluster::start(), RedisCluster::url),
        // A primary, two replicas and three sentinels.
        "redis-sentinel" => started(RedisSentinels::start(2), RedisSentinels::url),
        "redlock" => started(
            RedisMasters::start(3, Default::default()),
            RedisMasters::url,
        ),
        "etcd" => started(EtcdCluster::start_single(), EtcdCluster::url),
        "zookeeper" => started(ZookeeperEnsemble::start_single(), ZookeeperEnsemble::url),
        "postgres" => started(PostgresServer::start(), PostgresServer::url),
        "mariadb" | "mysql" => started(MariadbServer::start(), MariadbServer::url),
        "k8s" => started(KubeApiServer::start(), KubeApiServer::url),
        other => {
            eprintln!("lockward-testserver: unknown store {other:?}; one of: {STORES}");
            std::process::exit(2);
        }
    };
    println!("{url}");
    let _ = std::io::stdout().flush();
    eprintln!(
        "lockward-testserver: {store} is running; close stdin (Ctrl-D) or send SIGTERM to stop it"
    );

    let (stop, stopped) = mpsc::channel::<&str>();
    let on_eof = stop.clone();
    std::thread::spawn(move || {
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        let _ = on_eof.send("stdin closed");
    });
    std::thread::spawn(move || {
        let mut signal = 0;
        // SAFETY: `signals` is an initialised set; sigwait only writes `signal`.
        unsafe { libc::sigwait(&signals, &mut signal) };
        let _ = stop.send("signal");
    });
    let why = stopped.recv().unwrap_or("stopped");
    eprintln!("lockward-testserver: {why}; stopping {store}");
    drop(server);
}

fn started<T: Any>(server: T, url: fn(&T) -> String) -> (Box<dyn Any>, String) {
    let url = url(&server);
    (Box::new(server), url)
}

/// Blocks `signals` in this thread (and the threads it starts) and returns
/// the set, for `sigwait`.
fn block_signals(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: the set is initialised by sigemptyset before any other use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}
