//! `etcd` on free loopback ports: one member, or a 3-member cluster with a
//! short heartbeat (10 ms) and election timeout (100 ms), so failover tests
//! run in well under a second.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{free_port, require_binary, ServerProcess};

/// One member's ports and process.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    process: Option<ServerProcess>,
}

/// A running etcd cluster (one member or three), killed when dropped.
pub struct EtcdCluster {
    dir: tempfile::TempDir,
    token: String,
    members: Vec<Member>,
    /// Client connections over TLS, with a throwaway CA.
    tls: bool,
}

impl EtcdCluster {
    /// One member.
    pub fn start_single() -> EtcdCluster {
        EtcdCluster::start(1)
    }

    /// Three members.
    pub fn start_three() -> EtcdCluster {
        EtcdCluster::start(3)
    }

    /// One member serving clients over TLS only (`https://`), with a
    /// throwaway CA: `url()` gives `etcds://…?ca=…`.
    pub fn start_single_tls() -> EtcdCluster {
        EtcdCluster::start_with(1, true)
    }

    fn start(n: usize) -> EtcdCluster {
        EtcdCluster::start_with(n, false)
    }

    fn start_with(n: usize, tls: bool) -> EtcdCluster {
        require_binary("etcd");
        let dir = crate::scratch::data_dir("etcd");
        if tls {
            crate::certs::make_certificates(dir.path());
        }
        let members = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: free_port(),
                peer_port: free_port(),
                process: None,
            })
            .collect();
        let token = format!("lockward-{}", std::process::id());
        let mut cluster = EtcdCluster {
            dir,
            token,
            members,
            tls,
        };
        for i in 0..n {
            cluster.launch(i, "new");
        }
        cluster.wait_ready();
        cluster
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn launch(&mut self, i: usize, state: &str) {
        let initial = self.initial_cluster();
        let data = self
            .dir
            .path()
            .join(format!("{}.data", self.members[i].name));
        let log = self
            .dir
            .path()
            .join(format!("{}.log", self.members[i].name));
        let scheme = if self.tls { "https" } else { "http" };
        let certs = self.dir.path().to_path_buf();
        let tls = self.tls;
        let m = &mut self.members[i];
        let client = format!("{scheme}://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let mut cmd = Command::new("etcd");
        cmd.args(["--name", &m.name])
            .args(["--data-dir", &data.display().to_string()])
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &initial])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", &self.token])
            .args(["--heartbeat-interval", "10", "--election-timeout", "100"])
            .args(["--logger", "zap", "--log-level", "warn"]);
        if tls {
            cmd.arg(format!(
                "--cert-file={}",
                certs.join("server.pem").display()
            ))
            .arg(format!("--key-file={}", certs.join("server.key").display()));
        }
        m.process = Some(ServerProcess::spawn("etcd", cmd, &log).expect("spawn etcd"));
    }

    fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(30);
        for (i, m) in self.members.iter().enumerate() {
            if m.process.is_none() {
                continue;
            }
            while !(if self.tls {
                self.etcdctl(&["endpoint", "health"]).contains("is healthy")
                    || String::from_utf8_lossy(
                        &self
                            .etcdctl_command(&["endpoint", "health"])
                            .output()
                            .map(|o| o.stderr)
                            .unwrap_or_default(),
                    )
                    .contains("is healthy")
            } else {
                healthy(m.client_port)
            }) {
                assert!(
                    Instant::now() < until,
                    "etcd member {i} never became healthy; log:\n{}",
                    self.log(i)
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// `etcd://h1,h2,…` (or `etcds://…?ca=…`) for lockward.
    pub fn url(&self) -> String {
        if self.tls {
            format!(
                "etcds://{}?ca={}",
                self.endpoints().join(","),
                self.dir.path().join("ca.pem").display()
            )
        } else {
            format!("etcd://{}", self.endpoints().join(","))
        }
    }

    /// `127.0.0.1:port` of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// Saves a snapshot of the keyspace as it is now (`etcdctl snapshot
    /// save`) into the cluster's folder; its path.
    pub fn save_snapshot(&self) -> std::path::PathBuf {
        let path = self
            .dir
            .path()
            .join(format!("snapshot-{}.db", next_snapshot_number()));
        let out = self
            .etcdctl_command(&["snapshot", "save", &path.display().to_string()])
            .output()
            .expect("run etcdctl snapshot save");
        assert!(
            out.status.success(),
            "etcdctl snapshot save failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        path
    }

    /// Restores a one-member cluster from `snapshot`, as an operator does
    /// from last night's backup: the member is killed with kill -9, its
    /// data replaced by `etcdctl snapshot restore` (revisions go back to
    /// the snapshot's), and started again on the same ports.
    pub fn restore_snapshot(&mut self, snapshot: &std::path::Path) {
        assert_eq!(self.members.len(), 1, "restores are for one member");
        self.kill9(0);
        let data = self
            .dir
            .path()
            .join(format!("{}.data", self.members[0].name));
        std::fs::remove_dir_all(&data).expect("remove the member's data");
        let m = &self.members[0];
        let out = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "restore", &snapshot.display().to_string()])
            .args(["--data-dir", &data.display().to_string()])
            .args(["--name", &m.name])
            .args(["--initial-cluster", &self.initial_cluster()])
            .args(["--initial-cluster-token", &self.token])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{}", m.peer_port),
            ])
            .output()
            .expect("run etcdctl snapshot restore");
        assert!(
            out.status.success(),
            "etcdctl snapshot restore failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.launch(0, "new");
        self.wait_ready();
    }

    /// Runs `etcdctl` against every member with `args`; returns stdout.
    pub fn etcdctl(&self, args: &[&str]) -> String {
        let out = self.etcdctl_command(args).output().expect("run etcdctl");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// An `etcdctl` command against the cluster, to spawn by hand.
    pub fn etcdctl_command(&self, args: &[&str]) -> Command {
        require_binary("etcdctl");
        let mut cmd = Command::new("etcdctl");
        let scheme = if self.tls { "https://" } else { "" };
        let endpoints: Vec<String> = self
            .endpoints()
            .iter()
            .map(|e| format!("{scheme}{e}"))
            .collect();
        cmd.env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(endpoints.join(","));
        if self.tls {
            cmd.arg(format!(
                "--cacert={}",
                self.dir.path().join("ca.pem").display()
            ));
        }
        cmd.args(args);
        cmd
    }

    /// Index of the current leader, asked of each running member.
    pub fn leader(&self) -> Option<usize> {
        self.members.iter().position(|m| {
            m.process.is_some() && {
                let out = Command::new("etcdctl")
                    .env("ETCDCTL_API", "3")
                    .args(["--endpoints", &format!("127.0.0.1:{}", m.client_port)])
                    .args(["endpoint", "status", "-w", "fields"])
                    .output();
                out.map(|o| {
                    let text = String::from_utf8_lossy(&o.stdout).to_string();
                    let field = |name: &str| {
                        text.lines()
                            .find(|l| l.starts_with(&format!("\"{name}\"")))
                            .and_then(|l| l.split(':').nth(1))
                            .map(|v| v.trim().to_string())
                    };
                    field("MemberID").is_some() && field("MemberID") == field("Leader")
                })
                .unwrap_or(false)
            }
        })
    }

    /// The pid of member `i`, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i]
            .process
            .as_ref()
            .and_then(ServerProcess::pid)
    }

    /// kill -9 member `i`.
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut p) = self.members[i].process.take() {
            p.kill();
        }
    }

    /// Restarts member `i` with its data.
    pub fn restart(&mut self, i: usize) {
        self.kill9(i);
        self.launch(i, "existing");
        self.wait_ready();
    }

    /// SIGSTOP / SIGCONT member `i`.
    pub fn pause(&self, i: usize, paused: bool) {
        if let Some(p) = &self.members[i].process {
            p.signal(if paused { libc::SIGSTOP } else { libc::SIGCONT });
        }
    }

    /// Member `i`'s log so far.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(
            self.dir
                .path()
                .join(format!("{}.log", self.members[i].name)),
        )
        .unwrap_or_default()
    }
}

/// `GET /health` answers `"health":"true"`.
fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}

/// A few characters that make a file name unique within a run.
fn next_snapshot_number() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed).to_string()
}
