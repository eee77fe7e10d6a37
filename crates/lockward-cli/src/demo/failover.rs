//! The paused-holder story on a Redis that fails over in the middle
//! (`lockward demo --failover`): a primary and a replica the demo starts
//! itself on loopback ports. The replica falls behind (stopped), holder A
//! takes the lock on the primary and is paused, the primary dies (kill -9)
//! before the grant reached the replica, the replica is promoted and
//! grants the lock again to B, who writes; A resumes and writes with its
//! old fence. Unfenced, A's late write wins; fenced, it is refused: B's
//! fence is larger although the promoted replica never saw A's (each fence
//! is at least the server's clock in µs).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `redis-server` the demo started, killed when dropped.
struct Server {
    port: u16,
    child: Child,
}

impl Server {
    /// Starts `redis-server` without persistence on a free loopback port,
    /// following `primary` when given.
    fn start(dir: &Path, primary: Option<u16>) -> Result<Server, String> {
        let port = free_port()?;
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(p) = primary {
            cmd.args(["--replicaof", "127.0.0.1", &p.to_string()]);
        }
        let child = cmd.spawn().map_err(|e| {
            format!("the failover story starts its own Redis, and redis-server did not start: {e}")
        })?;
        let server = Server { port, child };
        let until = Instant::now() + Duration::from_secs(10);
        while server.command(&["PING"]).as_deref() != Some("PONG") {
            if Instant::now() > until {
                return Err("redis-server did not answer within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends one command; its reply's first line, or a bulk reply whole.
    fn command(&self, args: &[&str]) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for a in args {
            request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        stream.write_all(request.as_bytes()).ok()?;
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).ok()?;
            reply.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&reply);
            let complete = match text.chars().next() {
                // A bulk string: its length, then as many bytes.
                Some('$') => text.split_once("\r\n").is_some_and(|(len, rest)| {
                    len[1..].parse::<usize>().is_ok_and(|len| rest.len() >= len)
                }),
                _ => text.contains("\r\n"),
            };
            if n == 0 || complete {
                break;
            }
        }
        let text = String::from_utf8_lossy(&reply).into_owned();
        match text.split_once("\r\n") {
            Some((head, rest)) if head.starts_with('$') => Some(rest.trim_end().to_string()),
            Some((head, _)) => Some(head.trim_start_matches(['+', ':']).to_string()),
            None => None,
        }
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on a child we started and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// The two servers of one run: the primary, and the replica, synced.
pub(super) struct Pair {
    primary: Server,
    replica: Server,
}

impl Pair {
    pub(super) fn start(dir: &Path) -> Result<Pair, String> {
        let primary = Server::start(dir, None)?;
        let replica_dir = dir.join("replica");
        std::fs::create_dir_all(&replica_dir).map_err(|e| e.to_string())?;
        let replica = Server::start(&replica_dir, Some(primary.port))?;
        let until = Instant::now() + Duration::from_secs(10);
        while !replica
            .command(&["INFO", "replication"])
            .is_some_and(|i| i.contains("master_link_status:up"))
        {
            if Instant::now() > until {
                return Err("the replica did not sync with its primary within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Pair { primary, replica })
    }

    /// The primary's URL, where holder A takes the lock.
    pub(super) fn primary_url(&self) -> String {
        self.primary.url()
    }

    /// The replica's URL, where B takes the lock after the promotion.
    pub(super) fn replica_url(&self) -> String {
        self.replica.url()
    }

    /// The replica stops receiving (SIGSTOP), as one whose link is cut.
    pub(super) fn cut_the_replica_off(&self) {
        self.replica.signal(libc::SIGSTOP);
    }

    /// kill -9 of the primary, then the replica, resumed, is promoted. Says
    /// whether the promoted replica answers as a primary.
    pub(super) fn fail_over(&mut self) -> bool {
        let _ = self.primary.child.kill();
        let _ = self.primary.child.wait();
        self.replica.signal(libc::SIGCONT);
        self.replica.command(&["REPLICAOF", "NO", "ONE"]).as_deref() == Some("OK")
    }
}
