//! MariaDB on a free loopback port: `mariadb-install-db` into a temporary
//! folder owned by the `mysql` user, then `mariadbd` started as that user
//! (not dropping to it itself: a process that changes its user loses the
//! signal that kills it with the test process). Tests connect over TCP as `lockward` with a password, so they can
//! check a wrong one; the helper `sql` goes over the local socket as root.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{relaunch, wait_until_ready};
use crate::{free_port, require_binary, ServerProcess, INSTALL_SCRIPT};

/// The password of the `lockward` user in test servers.
pub const PASSWORD: &str = "lockward-test-secret";

/// A running MariaDB server, killed when dropped.
pub struct MariadbServer {
    dir: tempfile::TempDir,
    port: u16,
    uid: u32,
    gid: u32,
    /// Every commit flushed to disk, as in production (slower).
    durable: bool,
    /// Serving TLS with a throwaway CA (`ca.pem` in the folder).
    tls: bool,
    /// A libfaketime spec (`+5s`) the server runs under, if any.
    clock: Option<String>,
    process: Option<ServerProcess>,
}

/// Where Debian installs the server (not on every PATH).
fn server_binary() -> PathBuf {
    let sbin = Path::new("/usr/sbin/mariadbd");
    if sbin.is_file() {
        return sbin.to_path_buf();
    }
    require_binary("mariadbd")
}

/// The uid and gid of the `mysql` user.
fn mysql_user() -> (u32, u32) {
    let name = std::ffi::CString::new("mysql").expect("no NUL");
    // SAFETY: getpwnam returns a pointer into static storage or NULL; we
    // copy the two fields out at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(
        !pw.is_null(),
        "there is no `mysql` user; run {INSTALL_SCRIPT} (the mariadb-server package creates it)"
    );
    unsafe { ((*pw).pw_uid, (*pw).pw_gid) }
}

impl MariadbServer {
    /// Creates a data folder and starts the server, with quick commits (a
    /// kill -9 may lose the last ones).
    pub fn start() -> MariadbServer {
        MariadbServer::start_with(false, false)
    }

    /// The same with every commit flushed (`innodb_flush_log_at_trx_commit=1`),
    /// for crash tests.
    pub fn start_durable() -> MariadbServer {
        MariadbServer::start_with(true, false)
    }

    /// The same, also serving TLS with a throwaway CA: `tls_url()` connects
    /// with `ssl-mode=VERIFY_IDENTITY&ca=…`.
    pub fn start_tls() -> MariadbServer {
        MariadbServer::start_with(false, true)
    }

    fn start_with(durable: bool, tls: bool) -> MariadbServer {
        let binary = server_binary();
        let install = require_binary("mariadb-install-db");
        require_binary("mariadb-admin");
        let (uid, gid) = mysql_user();
        let dir = crate::scratch::data_dir("mariadb");
        // A temporary folder of its own: servers bootstrapping at once in
        // the shared /tmp trip over each other's temporary tables.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).expect("a temporary folder for mariadb");
        for owned in [dir.path(), tmp.as_path()] {
            std::os::unix::fs::chown(owned, Some(uid), Some(gid)).expect("chown the data folder");
        }
        let out = Command::new(install)
            .args(["--no-defaults", "--user=mysql", "--skip-test-db"])
            .arg("--auth-root-authentication-method=normal")
            .arg(format!("--datadir={}", dir.path().join("data").display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!(
                "--basedir={}",
                binary
                    .parent()
                    .and_then(Path::parent)
                    .unwrap_or(Path::new("/usr"))
                    .display()
            ))
            .output()
            .expect("run mariadb-install-db");
        assert!(
            out.status.success(),
            "mariadb-install-db failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if tls {
            crate::certs::make_certificates(dir.path());
            for file in ["ca.pem", "server.pem", "server.key"] {
                std::os::unix::fs::chown(dir.path().join(file), Some(uid), Some(gid))
                    .expect("chown the certificates");
            }
        }
        let mut server = MariadbServer {
            dir,
            port: 0,
            uid,
            gid,
            durable,
            tls,
            clock: None,
            process: None,
        };
        for _ in 0..5 {
            server.port = free_port();
            if server.launch() {
                server.sql(&format!(
                    "CREATE USER 'lockward'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}';
                     CREATE DATABASE lockward;
                     GRANT ALL ON lockward.* TO 'lockward'@'127.0.0.1';"
                ));
                return server;
            }
        }
        panic!("mariadbd did not start; log:\n{}", server.log());
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("mariadb.sock")
    }

    fn launch(&mut self) -> bool {
        let mut cmd = crate::clocked_command(server_binary(), self.clock.as_deref());
        let flush = if self.durable { "1" } else { "2" };
        cmd.arg("--no-defaults")
            .arg(format!(
                "--datadir={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!(
                "--tmpdir={}",
                self.dir.path().join("tmp").display()
            ))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!(
                "--pid-file={}",
                self.dir.path().join("mariadb.pid").display()
            ))
            .arg(format!("--innodb-flush-log-at-trx-commit={flush}"))
            .args(["--skip-name-resolve", "--max-connections=1000"])
            .arg("--innodb-buffer-pool-size=64M");
        if self.tls {
            let file = |name: &str| self.dir.path().join(name).display().to_string();
            cmd.arg(format!("--ssl-ca={}", file("ca.pem")))
                .arg(format!("--ssl-cert={}", file("server.pem")))
                .arg(format!("--ssl-key={}", file("server.key")));
        }
        cmd.uid(self.uid).gid(self.gid);
        let log = self.dir.path().join("mariadb.log");
        self.process = Some(ServerProcess::spawn("mariadbd", cmd, &log).expect("spawn mariadbd"));
        let socket = self.socket();
        let ping = || {
            Command::new("mariadb-admin")
                .arg("--no-defaults")
                .arg(format!("--socket={}", socket.display()))
                .args(["-uroot", "--connect-timeout=1", "ping"])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let every = Duration::from_millis(50);
        wait_until_ready(&mut self.process, Duration::from_secs(30), every, ping)
    }

    /// `mysql://lockward:…@127.0.0.1:PORT/lockward` for lockward.
    pub fn url(&self) -> String {
        format!(
            "mysql://lockward:{PASSWORD}@127.0.0.1:{}/lockward",
            self.port
        )
    }

    /// The URL with `ssl-mode=VERIFY_IDENTITY&ca=…` (servers from
    /// `start_tls`).
    pub fn tls_url(&self) -> String {
        format!(
            "{}?ssl-mode=VERIFY_IDENTITY&ca={}",
            self.url(),
            self.dir.path().join("ca.pem").display()
        )
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Runs SQL as root over the local socket, in the `lockward` database
    /// once it exists; returns the output (tab-separated, no headers).
    pub fn sql(&self, sql: &str) -> String {
        let out = Command::new("mariadb")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["-uroot", "--batch", "--skip-column-names", "-e", sql])
            .output()
            .expect("run mariadb");
        assert!(
            out.status.success(),
            "mariadb {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// kill -9, then starts it again on its data (crash recovery).
    pub fn restart(&mut self) {
        self.kill9();
        if !relaunch(|| self.launch()) {
            panic!("mariadbd did not restart; log:\n{}", self.log());
        }
    }

    /// kill -9, then starts it again with its clock shifted by `spec`
    /// (libfaketime's `+5s`; `None` for the host's clock): a clock jump.
    pub fn restart_with_clock(&mut self, spec: Option<&str>) {
        self.clock = spec.map(str::to_string);
        self.restart();
    }

    /// The server's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(ServerProcess::pid)
    }

    /// kill -9 the server.
    pub fn kill9(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
    }

    /// The server log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mariadb.log")).unwrap_or_default()
    }
}
