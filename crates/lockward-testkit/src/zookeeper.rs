//! ZooKeeper on free loopback ports: a standalone server, or a 3-node
//! ensemble, with a 100 ms tick so session-expiry tests take about a
//! second. Ready when `srvr` reports a `Mode:` line (a server that answers
//! `ruok` may still have no quorum).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{free_port, require_binary, ServerProcess};

/// Where Debian's `zookeeper` package puts the server's jar.
const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// Logging for the server (SLF4J to stderr, warnings only).
const SLF4J_JAR: &str = "/usr/share/java/slf4j-simple.jar";
/// Netty, for a server that speaks TLS (Debian's `libnetty-java`, which
/// `zookeeper` depends on).
const NETTY_JARS: [&str; 8] = [
    "/usr/share/java/netty-buffer.jar",
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-common.jar",
    "/usr/share/java/netty-handler.jar",
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-transport.jar",
    "/usr/share/java/netty-transport-native-epoll.jar",
    "/usr/share/java/netty-transport-native-unix-common.jar",
];

/// One node's ports and process.
struct Node {
    client_port: u16,
    /// The TLS port (`secureClientPort`), when the server speaks TLS.
    secure_port: Option<u16>,
    quorum_port: u16,
    election_port: u16,
    process: Option<ServerProcess>,
}

/// A running ZooKeeper (one node or three), killed when dropped.
pub struct ZookeeperEnsemble {
    dir: tempfile::TempDir,
    nodes: Vec<Node>,
    max_session: std::time::Duration,
}

impl ZookeeperEnsemble {
    /// A standalone server.
    pub fn start_single() -> ZookeeperEnsemble {
        ZookeeperEnsemble::start(1)
    }

    /// A 3-node ensemble.
    pub fn start_three() -> ZookeeperEnsemble {
        ZookeeperEnsemble::start(3)
    }

    /// A standalone server that grants sessions of at most `max_session`
    /// (its `maxSessionTimeout`), as many production servers do.
    pub fn start_single_capped(max_session: std::time::Duration) -> ZookeeperEnsemble {
        ZookeeperEnsemble::start_with(1, max_session)
    }

    /// A standalone server that also speaks TLS, on its `secureClientPort`
    /// (Netty, with a throwaway CA and a certificate for 127.0.0.1): see
    /// [`tls_url`](Self::tls_url).
    pub fn start_single_tls() -> ZookeeperEnsemble {
        ZookeeperEnsemble::start_with_tls(1, std::time::Duration::from_secs(60), true)
    }

    fn start(n: usize) -> ZookeeperEnsemble {
        ZookeeperEnsemble::start_with(n, std::time::Duration::from_secs(60))
    }

    fn start_with(n: usize, max_session: std::time::Duration) -> ZookeeperEnsemble {
        ZookeeperEnsemble::start_with_tls(n, max_session, false)
    }

    fn start_with_tls(n: usize, max_session: std::time::Duration, tls: bool) -> ZookeeperEnsemble {
        require_binary("java");
        assert!(
            std::path::Path::new(ZOOKEEPER_JAR).is_file(),
            "ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing); run {}",
            crate::INSTALL_SCRIPT
        );
        let dir = crate::scratch::data_dir("ZooKeeper");
        if tls {
            crate::certs::make_certificates(dir.path());
            let key = std::fs::read_to_string(dir.path().join("server.key")).expect("server.key");
            let cert = std::fs::read_to_string(dir.path().join("server.pem")).expect("server.pem");
            std::fs::write(dir.path().join("keystore.pem"), format!("{key}{cert}"))
                .expect("keystore");
        }
        let nodes = (0..n)
            .map(|_| Node {
                client_port: free_port(),
                secure_port: tls.then(free_port),
                quorum_port: free_port(),
                election_port: free_port(),
                process: None,
            })
            .collect();
        let mut ensemble = ZookeeperEnsemble {
            dir,
            nodes,
            max_session,
        };
        for i in 0..n {
            ensemble.write_config(i);
            ensemble.launch(i);
        }
        ensemble.wait_ready();
        ensemble
    }

    fn node_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node{i}"))
    }

    fn write_config(&self, i: usize) {
        let dir = self.node_dir(i);
        std::fs::create_dir_all(dir.join("data")).expect("ZooKeeper data dir");
        let node = &self.nodes[i];
        // tickTime 100 ms: sessions may be as short as 200 ms; the longest
        // is a minute (unless capped) so that tests can also ask for long TTLs.
        let mut cfg = format!(
            "tickTime=100\n\
             initLimit=50\n\
             syncLimit=10\n\
             dataDir={}\n\
             clientPort={}\n\
             clientPortAddress=127.0.0.1\n\
             minSessionTimeout=200\n\
             maxSessionTimeout={}\n\
             maxClientCnxns=0\n\
             4lw.commands.whitelist=*\n\
             admin.enableServer=false\n",
            dir.join("data").display(),
            node.client_port,
            self.max_session.as_millis()
        );
        if let Some(secure) = node.secure_port {
            let certs = self.dir.path();
            cfg.push_str(&format!(
                "secureClientPort={secure}\n\
                 secureClientPortAddress=127.0.0.1\n\
                 serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
                 ssl.keyStore.location={}\n\
                 ssl.keyStore.type=PEM\n\
                 ssl.trustStore.location={}\n\
                 ssl.trustStore.type=PEM\n\
                 ssl.clientAuth=none\n",
                certs.join("keystore.pem").display(),
                certs.join("ca.pem").display()
            ));
        }
        if self.nodes.len() > 1 {
            std::fs::write(dir.join("data/myid"), format!("{}\n", i + 1)).expect("myid");
            for (j, n) in self.nodes.iter().enumerate() {
                cfg.push_str(&format!(
                    "server.{}=127.0.0.1:{}:{}\n",
                    j + 1,
                    n.quorum_port,
                    n.election_port
                ));
            }
        }
        std::fs::write(dir.join("zoo.cfg"), cfg).expect("zoo.cfg");
    }

    fn launch(&mut self, i: usize) {
        let dir = self.node_dir(i);
        let mut cmd = Command::new("java");
        cmd.arg("-Xmx256m")
            .arg("-XX:+UseSerialGC")
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-Dzookeeper.admin.enableServer=false")
            // Empty container nodes are removed within a second.
            .arg("-Dznode.container.checkIntervalMs=1000")
            .arg("-cp")
            .arg(format!(
                "{ZOOKEEPER_JAR}:{SLF4J_JAR}:{}",
                NETTY_JARS.join(":")
            ))
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(dir.join("zoo.cfg"));
        let log = dir.join("server.log");
        self.nodes[i].process = Some(ServerProcess::spawn("zookeeper", cmd, &log).expect("spawn"));
    }

    fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(60);
        for (i, node) in self.nodes.iter().enumerate() {
            if node.process.is_none() {
                continue;
            }
            while !four_letter(node.client_port, "srvr").contains("Mode:") {
                assert!(
                    Instant::now() < until,
                    "ZooKeeper node {i} never served; log:\n{}",
                    self.log(i)
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// `zks://127.0.0.1:SECURE_PORT?ca=…` for lockward, on a server started
    /// with [`start_single_tls`](Self::start_single_tls).
    pub fn tls_url(&self) -> String {
        let ports: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "127.0.0.1:{}",
                    n.secure_port.expect("a server started with TLS")
                )
            })
            .collect();
        format!("zks://{}?ca={}", ports.join(","), self.ca_path().display())
    }

    /// The CA that signed a TLS server's certificate.
    pub fn ca_path(&self) -> std::path::PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// `zk://h1,h2,…` for lockward.
    pub fn url(&self) -> String {
        format!("zk://{}", self.endpoints().join(","))
    }

    /// `127.0.0.1:port` of every node.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.client_port))
            .collect()
    }

    /// Sends a four-letter command (`srvr`, `wchc`, `cons`, …) to node `i`
    /// and returns its answer ("" when the node does not answer).
    pub fn four_letter(&self, i: usize, command: &str) -> String {
        four_letter(self.nodes[i].client_port, command)
    }

    /// Index of the current leader (a standalone server leads itself).
    pub fn leader(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| {
            self.nodes[i].process.is_some() && {
                let mode = self.four_letter(i, "srvr");
                mode.contains("Mode: leader") || mode.contains("Mode: standalone")
            }
        })
    }

    /// The pid of node `i`, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.nodes[i].process.as_ref().and_then(ServerProcess::pid)
    }

    /// kill -9 node `i`.
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut p) = self.nodes[i].process.take() {
            p.kill();
        }
    }

    /// Restarts node `i` with its data and waits until it serves.
    pub fn restart(&mut self, i: usize) {
        self.kill9(i);
        self.launch(i);
        self.wait_ready();
    }

    /// SIGSTOP / SIGCONT node `i`.
    pub fn pause(&self, i: usize, paused: bool) {
        if let Some(p) = &self.nodes[i].process {
            p.signal(if paused { libc::SIGSTOP } else { libc::SIGCONT });
        }
    }

    /// Node `i`'s log so far.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.node_dir(i).join("server.log")).unwrap_or_default()
    }

    /// The number of watches node `i` holds, from `wchs` ("… Total
    /// watches:N").
    pub fn watch_count(&self, i: usize) -> Option<usize> {
        self.four_letter(i, "wchs")
            .lines()
            .find_map(|l| l.trim().strip_prefix("Total watches:"))
            .and_then(|n| n.trim().parse().ok())
    }
}

/// One four-letter command over a fresh connection.
fn four_letter(port: u16, command: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(command.as_bytes()).is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The classpath for a Java program that uses Curator's recipes, from
/// Debian's `libcurator-recipes-java` and its dependencies.
pub fn curator_classpath() -> String {
    let jars = [
        "curator-recipes",
        "curator-framework",
        "curator-client",
        "zookeeper",
        "zookeeper-jute",
        "guava",
        "slf4j-api",
        "slf4j-nop",
        "netty-handler",
        "netty-transport",
        "netty-common",
        "netty-buffer",
        "netty-codec",
        "netty-resolver",
        "netty-transport-native-epoll",
        "netty-transport-native-unix-common",
    ];
    let paths: Vec<String> = jars
        .iter()
        .map(|j| format!("/usr/share/java/{j}.jar"))
        .collect();
    for p in &paths[..3] {
        assert!(
            std::path::Path::new(p).is_file(),
            "Curator is not installed ({p} is missing); run {}",
            crate::INSTALL_SCRIPT
        );
    }
    paths.join(":")
}

/// Compiles `source` (a Java class named `class`) with `javac` against
/// Curator's jars into `dir`; returns the classpath to run it with.
pub fn compile_curator_program(dir: &std::path::Path, class: &str, source: &str) -> String {
    require_binary("javac");
    let file = dir.join(format!("{class}.java"));
    std::fs::write(&file, source).expect("write the Java source");
    let classpath = curator_classpath();
    let out = Command::new("javac")
        .arg("-cp")
        .arg(&classpath)
        .arg("-d")
        .arg(dir)
        .arg(&file)
        .output()
        .expect("run javac");
    assert!(
        out.status.success(),
        "javac failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("{}:{classpath}", dir.display())
}
