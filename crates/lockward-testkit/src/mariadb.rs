//! MariaDB on a free loopback port: `mariadb-install-db` into a temporary
//! folder owned by the `mysql` user, then `mariadbd` started as that user
//! (not dropping to it itself: a process that changes its user loses the
//! signal that kills it with the test process). Tests connect over TCP as `lockward` with a password, so they can
//! check a wrong one; the helper `sql` goes over the local socket as root.
//! A primary with a binary log and a replica following it are made with
//! `start_primary` and `start_replica_of`.

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
    /// The server id of a primary or replica (with a binary log); `None`
    /// for a server on its own.
    server_id: Option<u32>,
    process: Option<ServerProcess>,
}

/// The user a replica connects to its primary as.
const REPLICATION_USER: &str = "replicator";

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
        MariadbServer::start_with(false, false, None)
    }

    /// The same with a binary log (row-based, GTIDs) and a user that
    /// replicas connect as: a primary for [`start_replica_of`].
    ///
    /// [`start_replica_of`]: MariadbServer::start_replica_of
    pub fn start_primary() -> MariadbServer {
        let primary = MariadbServer::start_with(false, false, Some(1));
        primary.sql(&format!(
            "CREATE USER '{REPLICATION_USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}';
             GRANT REPLICATION SLAVE ON *.* TO '{REPLICATION_USER}'@'127.0.0.1';"
        ));
        primary
    }

    /// A replica of `primary` (asynchronous, as MariaDB replicates by
    /// default), caught up with it: it replays the primary's binary log
    /// from its start, the `lockward` user and database included.
    pub fn start_replica_of(primary: &MariadbServer) -> MariadbServer {
        let id = primary
            .server_id
            .expect("the primary comes from start_primary")
            + 1;
        let replica = MariadbServer::start_with(primary.durable, false, Some(id));
        replica.sql(&format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={},
                 MASTER_USER='{REPLICATION_USER}', MASTER_PASSWORD='{PASSWORD}',
                 MASTER_USE_GTID=slave_pos;
             START SLAVE;",
            primary.port
        ));
        replica.await_caught_up_with(primary);
        replica
    }

    /// Waits until this replica has applied everything `primary` has
    /// written so far.
    pub fn await_caught_up_with(&self, primary: &MariadbServer) {
        let target = primary.sql("SELECT @@gtid_binlog_pos");
        let waited = self.sql(&format!("SELECT MASTER_GTID_WAIT('{target}', 30)"));
        assert_eq!(
            waited,
            "0",
            "the replica did not reach {target} in 30 s; its status:\n{}",
            self.sql("SHOW SLAVE STATUS\\G")
        );
    }

    /// Stops replication on this replica (`STOP SLAVE`): it falls behind
    /// while its primary goes on committing, as a replica with a slow or
    /// cut link does.
    pub fn stop_replicating(&self) {
        self.sql("STOP SLAVE");
    }

    /// Makes this replica a primary of its own, as a failover does: it
    /// stops following and forgets its primary.
    pub fn promote(&self) {
        self.sql("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF;");
    }

    /// The same with every commit flushed (`innodb_flush_log_at_trx_commit=1`),
    /// for crash tests.
    pub fn start_durable() -> MariadbServer {
        MariadbServer::start_with(true, false, None)
    }

    /// The same, also serving TLS with a throwaway CA: `tls_url()` connects
    /// with `ssl-mode=VERIFY_IDENTITY&ca=…`.
    pub fn start_tls() -> MariadbServer {
        MariadbServer::start_with(false, true, None)
    }

    fn start_with(durable: bool, tls: bool, server_id: Option<u32>) -> MariadbServer {
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
            server_id,
            process: None,
        };
        // A replica (an id above 1) gets the user and the database from
        // its primary's log.
        let replica = server_id.is_some_and(|id| id > 1);
        for _ in 0..5 {
            server.port = free_port();
            if !server.launch() {
                continue;
            }
            if !replica {
                server.sql(&format!(
                    "CREATE USER 'lockward'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}';
                     CREATE DATABASE lockward;
                     GRANT ALL ON lockward.* TO 'lockward'@'127.0.0.1';"
                ));
            }
            return server;
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
        if let Some(id) = self.server_id {
            cmd.arg(format!("--server-id={id}"))
                .arg(format!(
                    "--log-bin={}",
                    self.dir.path().join("binlog").display()
                ))
                .args(["--binlog-format=ROW", "--log-slave-updates"]);
        }
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
