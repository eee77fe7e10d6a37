//! `redis-server` on a free loopback port.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{free_port, require_binary, ServerProcess};

/// How a Redis server is started.
#[derive(Debug, Clone, Default)]
pub struct RedisOptions {
    /// `--appendonly yes --appendfsync always`: locks and fence counters
    /// survive a kill -9. Off by default (`--save '' --appendonly no`).
    pub persistent: bool,
    /// `--requirepass`: the default user needs this password.
    pub password: Option<String>,
    /// `--cluster-enabled yes`, with its own bus port: a node for
    /// [`RedisCluster`].
    pub cluster_node: bool,
    /// TLS only (`--port 0 --tls-port …`), with a throwaway CA and a server
    /// certificate for 127.0.0.1 made with the openssl CLI; replication
    /// over TLS too.
    pub tls: bool,
    /// With `tls`: a folder whose `ca.pem`, `server.pem` and `server.key`
    /// the server uses instead of making its own, so that several servers
    /// (a primary, its replicas, their sentinels) share one CA.
    pub certificates: Option<PathBuf>,
}

/// A running `redis-server`, killed when dropped.
pub struct RedisServer {
    options: RedisOptions,
    dir: tempfile::TempDir,
    port: u16,
    bus_port: u16,
    process: Option<ServerProcess>,
    /// A libfaketime spec (`+5s`, `-2s`) the server runs under, if any.
    clock: Option<String>,
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> RedisServer {
        RedisServer::start_with(RedisOptions::default())
    }

    /// Starts a server with `options`.
    pub fn start_with(options: RedisOptions) -> RedisServer {
        require_binary("redis-server");
        let dir = crate::scratch::data_dir("redis");
        if options.tls {
            match &options.certificates {
                Some(from) => crate::certs::copy_certificates(from, dir.path()),
                None => crate::certs::make_certificates(dir.path()),
            }
        }
        let mut server = RedisServer {
            options,
            dir,
            port: 0,
            bus_port: 0,
            process: None,
            clock: None,
        };
        for _ in 0..5 {
            server.port = free_port();
            server.bus_port = free_port();
            if server.launch() {
                return server;
            }
        }
        panic!("redis-server did not start; log:\n{}", server.log());
    }

    fn launch(&mut self) -> bool {
        let mut cmd = crate::clocked_command("redis-server", self.clock.as_deref());
        cmd.current_dir(self.dir.path());
        if self.options.tls {
            let d = self.dir.path();
            cmd.args(["--port", "0", "--tls-port", &self.port.to_string()])
                .args([
                    "--tls-cert-file",
                    &d.join("server.pem").display().to_string(),
                ])
                .args([
                    "--tls-key-file",
                    &d.join("server.key").display().to_string(),
                ])
                .args([
                    "--tls-ca-cert-file",
                    &d.join("ca.pem").display().to_string(),
                ])
                .args(["--tls-auth-clients", "no", "--tls-replication", "yes"]);
        } else {
            cmd.args(["--port", &self.port.to_string()]);
        }
        cmd.args(["--bind", "127.0.0.1", "--protected-mode", "no"])
            .args(["--dir", &self.dir.path().display().to_string()])
            .args(["--save", ""]);
        if self.options.persistent {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        if let Some(p) = &self.options.password {
            cmd.args(["--requirepass", p]);
        }
        if self.options.cluster_node {
            cmd.args(["--cluster-enabled", "yes"])
                .args(["--cluster-config-file", "nodes.conf"])
                .args(["--cluster-node-timeout", "2000"])
                .args(["--cluster-port", &self.bus_port.to_string()]);
        }
        let log = self.log_path();
        let process = ServerProcess::spawn("redis-server", cmd, &log).expect("spawn redis-server");
        self.process = Some(process);
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if self.process.as_mut().is_some_and(|p| p.exited()) {
                self.process = None;
                return false;
            }
            if self.answers_ping() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// Whether the server answers PING (with its password, if any).
    pub fn answers_ping(&self) -> bool {
        if self.options.tls {
            return self.cli(&["PING"]) == "PONG";
        }
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut request = String::new();
        if let Some(p) = &self.options.password {
            request.push_str(&format!("AUTH {p}\r\n"));
        }
        request.push_str("PING\r\n");
        if s.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut buf = [0u8; 256];
        let mut seen = String::new();
        while !seen.contains("PONG") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
            if seen.contains("-ERR") || seen.contains("-LOADING") {
                return false;
            }
        }
        true
    }

    /// The port it listens on (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://…` (or `rediss://…?ca=…`) for lockward, with the password
    /// if one is set.
    pub fn url(&self) -> String {
        let scheme = if self.options.tls { "rediss" } else { "redis" };
        let auth = match &self.options.password {
            Some(p) => format!(":{p}@"),
            None => String::new(),
        };
        let query = if self.options.tls {
            format!("?ca={}", self.ca_path().display())
        } else {
            String::new()
        };
        format!("{scheme}://{auth}127.0.0.1:{}{query}", self.port)
    }

    /// The test CA's certificate (TLS servers only).
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(ServerProcess::pid)
    }

    /// kill -9: no chance to save anything it did not write already.
    pub fn kill9(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
    }

    /// A clean shutdown (SIGTERM).
    pub fn stop(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.stop(Duration::from_secs(5));
        }
    }

    /// Starts it again on the same port and folder (so persistent data
    /// comes back).
    pub fn restart(&mut self) {
        self.kill9();
        assert!(
            self.launch(),
            "redis-server did not restart; log:\n{}",
            self.log()
        );
    }

    /// kill -9, then starts it again with its clock shifted by `spec`
    /// (libfaketime's `+5s`, `-2s`; `None` for the host's clock): a clock
    /// jump at the restart.
    pub fn restart_with_clock(&mut self, spec: Option<&str>) {
        self.clock = spec.map(str::to_string);
        self.restart();
    }

    /// SIGSTOP: it stops answering but keeps its connections.
    pub fn pause(&self) {
        if let Some(p) = &self.process {
            p.signal(libc::SIGSTOP);
        }
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) {
        if let Some(p) = &self.process {
            p.signal(libc::SIGCONT);
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Makes this server a replica of `primary` (`REPLICAOF`) and waits
    /// until it has synchronised (`master_link_status:up`).
    pub fn replicate(&self, primary: &RedisServer) {
        self.cli(&["REPLICAOF", "127.0.0.1", &primary.port().to_string()]);
        let until = Instant::now() + Duration::from_secs(30);
        while !self
            .cli(&["INFO", "replication"])
            .contains("master_link_status:up")
        {
            assert!(
                Instant::now() < until,
                "the replica on {} never synchronised with {}; log:\n{}",
                self.port,
                primary.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs `redis-cli` against it with `args`, returning stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        require_binary("redis-cli");
        let mut cmd = Command::new("redis-cli");
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        if self.options.tls {
            cmd.args(["--tls", "--cacert", &self.ca_path().display().to_string()]);
        }
        if let Some(p) = &self.options.password {
            cmd.args(["--no-auth-warning", "-a", p]);
        }
        let out = cmd.args(args).output().expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// A Redis Cluster of three primaries (no replicas) on loopback.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, joins them with
    /// `redis-cli --cluster create`, and waits until every node reports
    /// `cluster_state:ok`.
    pub fn start() -> RedisCluster {
        require_binary("redis-cli");
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::start_with(RedisOptions {
                    cluster_node: true,
                    ..Default::default()
                })
            })
            .collect();
        let addrs: Vec<String> = nodes.iter().map(RedisServer::addr).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster { nodes };
        let until = Instant::now() + Duration::from_secs(20);
        while !cluster
            .nodes
            .iter()
            .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
        {
            assert!(
                Instant::now() < until,
                "the cluster never reached cluster_state:ok"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        cluster
    }

    /// `redis+cluster://h1,h2,h3` for lockward.
    pub fn url(&self) -> String {
        let addrs: Vec<String> = self.nodes.iter().map(RedisServer::addr).collect();
        format!("redis+cluster://{}", addrs.join(","))
    }

    /// The nodes, to inspect or fault them.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Runs `redis-cli -c` (cluster mode: follows redirects) with `args`.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut all = vec!["-c"];
        all.extend_from_slice(args);
        self.nodes[0].cli(&all)
    }
}

/// N independent Redis masters, for `redlock://`.
pub struct RedisMasters {
    masters: Vec<RedisServer>,
}

impl RedisMasters {
    /// Starts `n` servers with `options`.
    pub fn start(n: usize, options: RedisOptions) -> RedisMasters {
        RedisMasters {
            masters: (0..n)
                .map(|_| RedisServer::start_with(options.clone()))
                .collect(),
        }
    }

    /// `redlock://h1,h2,…` for lockward.
    pub fn url(&self) -> String {
        let addrs: Vec<String> = self.masters.iter().map(RedisServer::addr).collect();
        format!("redlock://{}", addrs.join(","))
    }

    /// `redlock://` over the first `n` masters only.
    pub fn url_of_first(&self, n: usize) -> String {
        let addrs: Vec<String> = self.masters[..n].iter().map(RedisServer::addr).collect();
        format!("redlock://{}", addrs.join(","))
    }

    /// The masters, to inspect or fault them.
    pub fn masters(&mut self) -> &mut [RedisServer] {
        &mut self.masters
    }
}
