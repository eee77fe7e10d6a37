//! PostgreSQL on a free loopback port: `initdb` and `postgres` run as the
//! `postgres` user (the server refuses root), with `fsync=off` for speed.
//! TCP connections need the password (scram-sha-256), so tests can check a
//! wrong one; the helper `psql` uses the local socket. A streaming standby
//! of a test server is made with `pg_basebackup -R` (`start_standby`).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::process::{relaunch, wait_until_ready};
use crate::{free_port, ServerProcess, INSTALL_SCRIPT};

/// The password of the `postgres` role in test servers.
pub const PASSWORD: &str = "lockward-test-secret";

/// A running PostgreSQL server, killed when dropped.
pub struct PostgresServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    uid: u32,
    gid: u32,
    tls: bool,
    /// fsync and synchronous commits on, as in production (slower).
    durable: bool,
    /// A libfaketime spec (`+5s`) the server runs under, if any.
    clock: Option<String>,
    process: Option<ServerProcess>,
}

/// Where Debian installs the server binaries (not on the PATH).
fn find_bin() -> PathBuf {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").is_file())
        .collect();
    candidates.sort();
    candidates.pop().unwrap_or_else(|| {
        panic!("PostgreSQL's initdb is not installed; run {INSTALL_SCRIPT} (it installs every test server from Debian's packages)")
    })
}

/// The uid and gid of the `postgres` user.
fn postgres_user() -> (u32, u32) {
    let name = std::ffi::CString::new("postgres").expect("no NUL");
    // SAFETY: getpwnam returns a pointer into static storage or NULL; we
    // copy the two fields out at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(
        !pw.is_null(),
        "there is no `postgres` user; run {INSTALL_SCRIPT} (the postgresql package creates it)"
    );
    unsafe { ((*pw).pw_uid, (*pw).pw_gid) }
}

impl PostgresServer {
    /// Initialises a cluster in a temporary folder and starts it.
    pub fn start() -> PostgresServer {
        PostgresServer::start_with(false, false)
    }

    /// The same with fsync and synchronous commits on (the defaults in
    /// production), for crash tests: the quick settings of [`start`]
    /// lose the last commits at a kill -9, fence sequence included.
    ///
    /// [`start`]: PostgresServer::start
    pub fn start_durable() -> PostgresServer {
        PostgresServer::start_with(false, true)
    }

    /// The same, also serving TLS (`ssl=on`) with a throwaway CA:
    /// `tls_url()` connects with `sslmode=require&ca=…`.
    pub fn start_tls() -> PostgresServer {
        PostgresServer::start_with(true, false)
    }

    fn start_with(tls: bool, durable: bool) -> PostgresServer {
        let bin = find_bin();
        let (uid, gid) = postgres_user();
        let dir = crate::scratch::data_dir("postgres");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown the data folder");
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).unwrap();
        let out = Command::new(bin.join("initdb"))
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-U", "postgres", "-E", "UTF8", "--locale=C"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .uid(uid)
            .gid(gid)
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if tls {
            crate::certs::make_certificates(dir.path());
            for file in ["server.pem", "server.key"] {
                let path = dir.path().join(file);
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
                std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
            }
        }
        let mut server = PostgresServer {
            dir,
            bin,
            port: 0,
            uid,
            gid,
            tls,
            durable,
            clock: None,
            process: None,
        };
        for _ in 0..5 {
            server.port = free_port();
            if server.launch() {
                return server;
            }
        }
        panic!("postgres did not start; log:\n{}", server.log());
    }

    /// A streaming standby of `primary` on a port of its own: its data
    /// copied with `pg_basebackup -R` (which writes `standby.signal` and
    /// the connection to the primary), started with the primary's settings.
    /// It follows the primary until [`promote`](PostgresServer::promote).
    pub fn start_standby(primary: &PostgresServer) -> PostgresServer {
        let dir = crate::scratch::data_dir("postgres-standby");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(dir.path(), Some(primary.uid), Some(primary.gid))
            .expect("chown the data folder");
        // Over the primary's socket, where the postgres role needs no
        // password; the standby keeps following it there.
        let out = Command::new(primary.bin.join("pg_basebackup"))
            .arg("-h")
            .arg(primary.dir.path())
            .args(["-p", &primary.port.to_string(), "-U", "postgres"])
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-R", "-X", "stream", "--checkpoint=fast"])
            .uid(primary.uid)
            .gid(primary.gid)
            .output()
            .expect("run pg_basebackup");
        assert!(
            out.status.success(),
            "pg_basebackup failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut standby = PostgresServer {
            dir,
            bin: primary.bin.clone(),
            port: 0,
            uid: primary.uid,
            gid: primary.gid,
            tls: false,
            durable: primary.durable,
            clock: None,
            process: None,
        };
        for _ in 0..5 {
            standby.port = free_port();
            if standby.launch() {
                return standby;
            }
        }
        panic!("the standby did not start; log:\n{}", standby.log());
    }

    /// Waits until every standby streaming from this primary has replayed
    /// what the primary has written so far.
    pub fn await_standbys_caught_up(&self) {
        let until = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let behind = self.psql(
                "SELECT count(*) FROM pg_stat_replication
                 WHERE replay_lsn IS NULL OR replay_lsn < pg_current_wal_lsn()",
            );
            let streaming = self.psql("SELECT count(*) FROM pg_stat_replication");
            if behind == "0" && streaming != "0" {
                return;
            }
            assert!(
                std::time::Instant::now() < until,
                "the standbys did not catch up in 30 s ({streaming} streaming, {behind} behind)"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops (SIGSTOP) this primary's WAL senders: its standbys fall
    /// behind while it goes on committing, as a standby does whose link
    /// is slow or cut. A [`kill9`](PostgresServer::kill9) ends them.
    pub fn pause_wal_senders(&self) {
        // A standby just started may not be streaming yet.
        let until = std::time::Instant::now() + Duration::from_secs(30);
        let pids = loop {
            let pids = self.psql("SELECT pid FROM pg_stat_replication");
            if !pids.is_empty() {
                break pids;
            }
            assert!(
                std::time::Instant::now() < until,
                "no standby is streaming from this server after 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        for pid in pids.lines() {
            let pid: i32 = pid.trim().parse().expect("a pid");
            // SAFETY: a plain syscall on a process of the server we started.
            unsafe {
                libc::kill(pid, libc::SIGSTOP);
            }
        }
    }

    /// Promotes a standby to a primary (`pg_promote`, which waits until
    /// the server accepts writes).
    pub fn promote(&self) {
        let done = self.psql("SELECT pg_promote(true, 60)");
        assert_eq!(
            done,
            "t",
            "the standby was not promoted; log:\n{}",
            self.log()
        );
    }

    fn launch(&mut self) -> bool {
        let mut cmd = crate::clocked_command(self.bin.join("postgres"), self.clock.as_deref());
        cmd.arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ))
            .args(if self.durable {
                &[][..]
            } else {
                &[
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                ][..]
            })
            // `lockward bench` at 256 clients: a connection each, one more
            // while a client waits (its baton's session), and 240 idle
            // listeners of another program beside them.
            .args(["-c", "max_connections=1000"]);
        if self.tls {
            cmd.args(["-c", "ssl=on"])
                .arg("-c")
                .arg(format!(
                    "ssl_cert_file={}",
                    self.dir.path().join("server.pem").display()
                ))
                .arg("-c")
                .arg(format!(
                    "ssl_key_file={}",
                    self.dir.path().join("server.key").display()
                ));
        }
        cmd.uid(self.uid).gid(self.gid);
        let log = self.dir.path().join("postgres.log");
        self.process = Some(ServerProcess::spawn("postgres", cmd, &log).expect("spawn postgres"));
        let (isready, port) = (self.bin.join("pg_isready"), self.port.to_string());
        let ready = || {
            Command::new(&isready)
                .args(["-h", "127.0.0.1", "-p", &port, "-q"])
                .status()
                .is_ok_and(|s| s.success())
        };
        let every = Duration::from_millis(20);
        wait_until_ready(&mut self.process, Duration::from_secs(30), every, ready)
    }

    /// `postgres://postgres:…@127.0.0.1:PORT/postgres` for lockward.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres:{PASSWORD}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// The URL with `sslmode=require&ca=…` (servers from `start_tls`).
    pub fn tls_url(&self) -> String {
        format!(
            "{}?sslmode=require&ca={}",
            self.url(),
            self.dir.path().join("ca.pem").display()
        )
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Runs one SQL command with `psql` over the local socket; returns its
    /// unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .arg("-h")
            .arg(self.dir.path())
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
            ])
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .uid(self.uid)
            .gid(self.gid)
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// kill -9, then starts it again on its data (crash recovery). Retries
    /// while the old backends still hold the shared memory.
    pub fn restart(&mut self) {
        self.kill9();
        if !relaunch(|| self.launch()) {
            panic!("postgres did not restart; log:\n{}", self.log());
        }
    }

    /// kill -9, then starts it again with its clock shifted by `spec`
    /// (libfaketime's `+5s`; `None` for the host's clock): a clock jump.
    pub fn restart_with_clock(&mut self, spec: Option<&str>) {
        self.clock = spec.map(str::to_string);
        self.restart();
    }

    /// The postmaster's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(ServerProcess::pid)
    }

    /// kill -9 the postmaster and every backend at once, as a crash of
    /// its machine would (a stopped WAL sender included).
    pub fn kill9(&mut self) {
        if let Some(mut p) = self.process.take() {
            for pid in p.pid().map(crate::process::descendants).unwrap_or_default() {
                // SAFETY: a plain syscall on a process below one we started.
                unsafe {
                    libc::kill(pid as i32, libc::SIGKILL);
                }
            }
            p.kill();
        }
    }

    /// The server log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }
}
