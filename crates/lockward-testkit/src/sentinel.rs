//! Redis with Sentinel on loopback: a primary, its replicas and three
//! sentinels (`redis-server --sentinel`) that agree with a quorum of two,
//! tuned to fail over within a few seconds.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::port::free_port;
use crate::process::{wait_until_ready, ServerProcess};
use crate::redis::{RedisOptions, RedisServer};
use crate::require_binary;

/// The name the sentinels monitor the primary under.
pub const PRIMARY_NAME: &str = "lockward-primary";

/// How long the sentinels wait before they call an unanswering primary
/// down (`down-after-milliseconds`).
pub const DOWN_AFTER: Duration = Duration::from_millis(1_000);

/// A primary, `n` replicas and three sentinels.
pub struct RedisSentinels {
    /// Every data node; which one is the primary changes with failovers.
    nodes: Vec<RedisServer>,
    sentinels: Vec<Sentinel>,
    /// With TLS everywhere: the folder of the one CA every node and
    /// sentinel shares.
    certificates: Option<tempfile::TempDir>,
    /// When the last primary was killed.
    killed_at: Option<Instant>,
}

/// One sentinel process and its folder (it rewrites its config file).
struct Sentinel {
    port: u16,
    dir: tempfile::TempDir,
    process: Option<ServerProcess>,
    /// TLS only: the CA its certificate (and the nodes') comes from.
    ca: Option<PathBuf>,
}

impl Sentinel {
    fn start(primary_port: u16, certificates: Option<&Path>) -> Sentinel {
        let dir = crate::scratch::data_dir("sentinel");
        if let Some(from) = certificates {
            crate::certs::copy_certificates(from, dir.path());
        }
        let ca = certificates.map(|_| dir.path().join("ca.pem"));
        let mut sentinel = Sentinel {
            port: 0,
            dir,
            process: None,
            ca,
        };
        for _ in 0..5 {
            sentinel.port = free_port();
            if sentinel.launch(primary_port) {
                return sentinel;
            }
        }
        panic!(
            "redis-server --sentinel did not start; log:\n{}",
            sentinel.log()
        );
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("sentinel.conf")
    }

    fn launch(&mut self, primary_port: u16) -> bool {
        let down = DOWN_AFTER.as_millis();
        let d = self.dir.path().display();
        let listen = match self.ca {
            // TLS to clients, to the data nodes and between sentinels.
            Some(_) => format!(
                "port 0\ntls-port {port}\ntls-cert-file {d}/server.pem\ntls-key-file {d}/server.key\n\
                 tls-ca-cert-file {d}/ca.pem\ntls-auth-clients no\ntls-replication yes\n",
                port = self.port
            ),
            None => format!("port {}\n", self.port),
        };
        let conf = format!(
            "{listen}bind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
             sentinel monitor {PRIMARY_NAME} 127.0.0.1 {primary_port} 2\n\
             sentinel down-after-milliseconds {PRIMARY_NAME} {down}\n\
             sentinel failover-timeout {PRIMARY_NAME} 4000\n\
             sentinel parallel-syncs {PRIMARY_NAME} 2\n",
            dir = self.dir.path().display(),
        );
        std::fs::write(self.config(), conf).expect("write sentinel.conf");
        let mut cmd = Command::new("redis-server");
        cmd.current_dir(self.dir.path())
            .arg(self.config())
            .arg("--sentinel");
        let log = self.dir.path().join("sentinel.log");
        self.process = Some(ServerProcess::spawn("redis-sentinel", cmd, &log).expect("spawn"));
        let (port, ca) = (self.port, self.ca.clone());
        wait_until_ready(
            &mut self.process,
            Duration::from_secs(10),
            Duration::from_millis(10),
            || sentinel_cli(port, ca.as_deref(), &["PING"]) == "PONG",
        )
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default()
    }
}

/// `redis-cli` against the sentinel on `port` (over TLS when `ca` names
/// the CA to trust).
fn sentinel_cli(port: u16, ca: Option<&Path>, args: &[&str]) -> String {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    if let Some(ca) = ca {
        cmd.args(["--tls", "--cacert", &ca.display().to_string()]);
    }
    let out = cmd.args(args).output().expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl RedisSentinels {
    /// Starts a primary, `replicas` replicas of it and three sentinels,
    /// and waits until every sentinel knows every replica and the other
    /// sentinels (so that a failover can be agreed on).
    pub fn start(replicas: usize) -> RedisSentinels {
        RedisSentinels::start_with(replicas, false)
    }

    /// [`start`](Self::start) with TLS everywhere: clients to the
    /// sentinels and the data nodes, replication, and the sentinels to the
    /// data nodes, all with certificates of one throwaway CA
    /// ([`ca_path`](Self::ca_path)).
    pub fn start_tls(replicas: usize) -> RedisSentinels {
        RedisSentinels::start_with(replicas, true)
    }

    fn start_with(replicas: usize, tls: bool) -> RedisSentinels {
        require_binary("redis-server");
        require_binary("redis-cli");
        let certificates = tls.then(|| {
            let dir = crate::scratch::data_dir("sentinel-ca");
            crate::certs::make_certificates(dir.path());
            dir
        });
        let options = RedisOptions {
            tls,
            certificates: certificates.as_ref().map(|d| d.path().to_path_buf()),
            ..Default::default()
        };
        let mut nodes = vec![RedisServer::start_with(options.clone())];
        for _ in 0..replicas {
            let replica = RedisServer::start_with(options.clone());
            replica.replicate(&nodes[0]);
            nodes.push(replica);
        }
        let shared = certificates.as_ref().map(|d| d.path());
        let set = RedisSentinels {
            sentinels: (0..3)
                .map(|_| Sentinel::start(nodes[0].port(), shared))
                .collect(),
            nodes,
            certificates,
            killed_at: None,
        };
        set.wait("the sentinels to know each other and the replicas", |s| {
            s.sentinels.iter().all(|x| {
                let known = |what: &str| {
                    sentinel_cli(x.port, x.ca.as_deref(), &["SENTINEL", what, PRIMARY_NAME])
                        .lines()
                        .filter(|l| *l == "name")
                        .count()
                };
                known("sentinels") == 2 && known("replicas") == replicas
            })
        });
        set
    }

    fn wait(&self, what: &str, done: impl Fn(&RedisSentinels) -> bool) {
        let until = Instant::now() + Duration::from_secs(30);
        while !done(self) {
            assert!(
                Instant::now() < until,
                "Sentinel set-up: waited 30 s for {what}; sentinel log:\n{}",
                self.sentinels[0].log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `redis+sentinel://s1,s2,s3/lockward-primary` for lockward
    /// (`rediss+sentinel://…?ca=…` with TLS).
    pub fn url(&self) -> String {
        let addrs: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        match self.ca_path() {
            Some(ca) => format!(
                "rediss+sentinel://{}/{PRIMARY_NAME}?ca={}",
                addrs.join(","),
                ca.display()
            ),
            None => format!("redis+sentinel://{}/{PRIMARY_NAME}", addrs.join(",")),
        }
    }

    /// The CA every node and sentinel's certificate comes from (TLS only).
    pub fn ca_path(&self) -> Option<PathBuf> {
        self.certificates.as_ref().map(|d| d.path().join("ca.pem"))
    }

    /// The port of the primary the sentinels name now.
    pub fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let reply = sentinel_cli(
                s.port,
                s.ca.as_deref(),
                &["SENTINEL", "get-master-addr-by-name", PRIMARY_NAME],
            );
            reply.lines().nth(1)?.trim().parse().ok()
        })
    }

    /// The data node listening on `port`.
    pub fn node(&mut self, port: u16) -> Option<&mut RedisServer> {
        self.nodes.iter_mut().find(|n| n.port() == port)
    }

    /// Kills the primary with kill -9 and waits until the sentinels name a
    /// new one (and it says it is a primary); the old one's port and the
    /// new one's. The old one stays down: [`restart_node`](Self::restart_node)
    /// brings it back, as a replica once the sentinels reconfigure it.
    pub fn kill_primary(&mut self) -> (u16, u16) {
        let old = self.primary_port().expect("the sentinels name a primary");
        self.killed_at = Some(Instant::now());
        self.node(old).expect("the primary is one of ours").kill9();
        self.await_failover(old)
    }

    /// When the last [`kill_primary`](Self::kill_primary) or
    /// [`promote_a_lagging_replica`](Self::promote_a_lagging_replica)
    /// killed the primary: what it had not replicated was lost from then
    /// on, and clients may be granted on the new primary before the
    /// sentinels' answers show the failover.
    pub fn killed_at(&self) -> Option<Instant> {
        self.killed_at
    }

    /// A failover asked for by hand (`SENTINEL FAILOVER`), as an operator
    /// does before maintenance: the old primary stays up and is made a
    /// replica. Waits until the sentinels name the new primary and it says
    /// it is one; the old one's port and the new one's.
    pub fn fail_over_by_hand(&mut self) -> (u16, u16) {
        let old = self.primary_port().expect("the sentinels name a primary");
        let reply = sentinel_cli(
            self.sentinels[0].port,
            self.sentinels[0].ca.as_deref(),
            &["SENTINEL", "FAILOVER", PRIMARY_NAME],
        );
        assert_eq!(reply, "OK", "SENTINEL FAILOVER: {reply}");
        self.await_failover(old)
    }

    /// Loses the primary's last writes: every replica is stopped (SIGSTOP)
    /// while the primary works on alone for `lag`, then the primary is
    /// killed with kill -9 and the replicas resumed, and a replica that
    /// missed those writes is promoted. The old one's port and the new
    /// one's; the old one stays down, as after [`kill_primary`](Self::kill_primary).
    pub fn promote_a_lagging_replica(&mut self, lag: Duration) -> (u16, u16) {
        let old = self.primary_port().expect("the sentinels name a primary");
        for replica in self.nodes.iter().filter(|n| n.port() != old) {
            replica.pause();
        }
        std::thread::sleep(lag);
        self.killed_at = Some(Instant::now());
        self.node(old).expect("the primary is one of ours").kill9();
        for replica in self.nodes.iter().filter(|n| n.port() != old) {
            replica.resume();
        }
        self.await_failover(old)
    }

    /// The process id of the data node on `port`.
    pub fn pid(&self, port: u16) -> Option<u32> {
        self.nodes.iter().find(|n| n.port() == port)?.pid()
    }

    /// Waits until the sentinels name a primary other than the one on
    /// `old` and it says it is a primary; `(old, new)`.
    pub fn await_failover(&mut self, old: u16) -> (u16, u16) {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(new) = self.primary_port().filter(|p| *p != old) {
                let promoted = self
                    .node(new)
                    .is_some_and(|n| n.cli(&["ROLE"]).lines().next() == Some("master"));
                if promoted {
                    return (old, new);
                }
            }
            assert!(
                Instant::now() < until,
                "no failover within 30 s; sentinel log:\n{}",
                self.sentinels[0].log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the node on `port` again (after a kill).
    pub fn restart_node(&mut self, port: u16) {
        if let Some(node) = self.node(port) {
            node.restart();
        }
    }
}
