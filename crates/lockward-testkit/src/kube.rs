//! A Kubernetes API server for tests: `kube-apiserver` on a free loopback
//! port over an `etcd` of its own, both built from Go modules by
//! `scripts/build-kube-testservers.sh` (Debian's etcd is too old for
//! current Kubernetes). TLS with a throwaway CA, a token file with an admin
//! (`system:masters`) and a user without any rights, RBAC authorization, a
//! service-account key; a kubeconfig per user for lockward, `kubectl` and
//! client-go.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::{free_port, ServerProcess};

/// The script that builds the binaries, relative to the workspace.
pub const BUILD_SCRIPT: &str = "scripts/build-kube-testservers.sh";

/// A running kube-apiserver and its etcd, killed when dropped.
pub struct KubeApiServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    etcd_port: u16,
    etcd: Option<ServerProcess>,
    apiserver: Option<ServerProcess>,
}

/// The folder with `kube-apiserver`, `kubectl`, `etcd` and `lease-leader`:
/// the build script's cache, built on first use (which takes minutes).
pub fn binaries() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Command::new("bash")
            .arg(root.join(BUILD_SCRIPT))
            .output()
            .unwrap_or_else(|e| panic!("cannot run {BUILD_SCRIPT}: {e}"));
        assert!(
            out.status.success(),
            "{BUILD_SCRIPT} failed (it needs Go 1.26 and the Go module proxy; {} runs it):\n{}",
            crate::INSTALL_SCRIPT,
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string();
        PathBuf::from(dir)
    })
    .clone()
}

impl KubeApiServer {
    /// Starts etcd and the API server and waits until `/readyz` says ok.
    pub fn start() -> KubeApiServer {
        let bin = binaries();
        let dir = crate::scratch::data_dir("kube-apiserver");
        crate::certs::make_certificates(dir.path());
        let key = Command::new("openssl")
            .current_dir(dir.path())
            .args([
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
                "sa.key",
            ])
            .output()
            .expect("run openssl");
        assert!(key.status.success(), "openssl ecparam failed");
        std::fs::write(
            dir.path().join("tokens.csv"),
            format!("{ADMIN_TOKEN},lockward-admin,1,\"system:masters\"\n{NOBODY_TOKEN},nobody,2\n"),
        )
        .expect("write tokens.csv");
        let mut server = KubeApiServer {
            dir,
            bin,
            port: free_port(),
            etcd_port: free_port(),
            etcd: None,
            apiserver: None,
        };
        server.start_etcd();
        server.write_kubeconfig("admin", ADMIN_TOKEN);
        server.write_kubeconfig("nobody", NOBODY_TOKEN);
        server.start_apiserver();
        server
    }

    fn start_etcd(&mut self) {
        let peer = free_port();
        let client = format!("http://127.0.0.1:{}", self.etcd_port);
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new(self.bin.join("etcd"));
        cmd.args(["--name", "kube"])
            .arg(format!(
                "--data-dir={}",
                self.dir.path().join("etcd.data").display()
            ))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .arg(format!("--initial-cluster=kube={peer_url}"))
            .args(["--log-level", "warn"]);
        let log = self.dir.path().join("etcd.log");
        self.etcd =
            Some(ServerProcess::spawn("etcd (for kube-apiserver)", cmd, &log).expect("spawn etcd"));
    }

    /// Starts the API server (again, after [`kill_apiserver`](Self::kill_apiserver))
    /// on the same port and waits until it is ready.
    pub fn start_apiserver(&mut self) {
        let d = self.dir.path();
        let file = |name: &str| d.join(name).display().to_string();
        let mut cmd = Command::new(self.bin.join("kube-apiserver"));
        cmd.arg(format!(
            "--etcd-servers=http://127.0.0.1:{}",
            self.etcd_port
        ))
        .args(["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"])
        .arg(format!("--secure-port={}", self.port))
        .arg(format!("--cert-dir={}", file("certs")))
        .arg(format!("--tls-cert-file={}", file("server.pem")))
        .arg(format!("--tls-private-key-file={}", file("server.key")))
        .arg(format!("--token-auth-file={}", file("tokens.csv")))
        .arg("--authorization-mode=RBAC")
        .arg("--service-account-issuer=https://kubernetes.default.svc")
        .arg(format!("--service-account-key-file={}", file("sa.key")))
        .arg(format!(
            "--service-account-signing-key-file={}",
            file("sa.key")
        ))
        .arg("--service-cluster-ip-range=10.96.0.0/24")
        // No Service endpoints for a loopback address.
        .arg("--endpoint-reconciler-type=none")
        // Fewer moving parts on a small test machine.
        .args(["--enable-priority-and-fairness=false", "--profiling=false"]);
        let log = d.join("kube-apiserver.log");
        self.apiserver =
            Some(ServerProcess::spawn("kube-apiserver", cmd, &log).expect("spawn kube-apiserver"));
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            let out = self.kubectl(&["get", "--raw", "/readyz"]);
            // The namespace the tests use exists once bootstrapping is done.
            if out.status.success()
                && self
                    .kubectl(&["get", "namespace", "default"])
                    .status
                    .success()
            {
                return;
            }
            let exited = self.apiserver.as_mut().is_none_or(ServerProcess::exited);
            assert!(
                !exited && Instant::now() < until,
                "kube-apiserver did not become ready; last answer: {}; log:\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGKILLs the API server (its etcd keeps running).
    pub fn kill_apiserver(&mut self) {
        if let Some(mut p) = self.apiserver.take() {
            p.kill();
        }
    }

    /// The API server's process id, while it runs.
    pub fn apiserver_pid(&self) -> Option<u32> {
        self.apiserver.as_ref().and_then(ServerProcess::pid)
    }

    /// `k8s://default?kubeconfig=…` as the admin.
    pub fn url(&self) -> String {
        format!("k8s://default?kubeconfig={}", self.kubeconfig().display())
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// The kubeconfig of a user the API server knows but grants nothing.
    pub fn nobody_kubeconfig(&self) -> PathBuf {
        self.dir.path().join("nobody.kubeconfig")
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server(&self) -> String {
        format!("https://{}", self.addr())
    }

    /// `127.0.0.1:PORT` of the API server.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `k8s://default?kubeconfig=…` as the admin, through `addr` (a proxy
    /// in front of the API server) instead of the API server's own port.
    pub fn url_via(&self, addr: &str) -> String {
        let name = format!("via-{}", addr.replace([':', '.'], "-"));
        self.write_kubeconfig_to(&name, &format!("https://{addr}"), "admin", ADMIN_TOKEN);
        format!(
            "k8s://default?kubeconfig={}",
            self.dir.path().join(format!("{name}.kubeconfig")).display()
        )
    }

    fn write_kubeconfig(&self, user: &str, token: &str) {
        self.write_kubeconfig_to(user, &self.server(), user, token);
    }

    fn write_kubeconfig_to(&self, file: &str, server: &str, user: &str, token: &str) {
        let text = format!(
            "apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: {user}
  user:
    token: {token}
contexts:
- name: {user}
  context:
    cluster: test
    user: {user}
    namespace: default
current-context: {user}
",
            ca = self.dir.path().join("ca.pem").display(),
        );
        std::fs::write(self.dir.path().join(format!("{file}.kubeconfig")), text)
            .expect("write kubeconfig");
    }

    /// A `kubectl` command as the admin.
    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.bin.join("kubectl"));
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig().display()))
            .args(["--request-timeout=10s"])
            .args(args);
        cmd
    }

    /// Runs `kubectl` as the admin.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_command(args).output().expect("run kubectl")
    }

    /// client-go's `LeaderElector` on Lease `lease` in `default` as
    /// `identity`, with lease duration, renew deadline and retry period
    /// (client-go's defaults are 15 s, 10 s and 2 s). It prints
    /// `MILLIS started leading ID`, `MILLIS stopped leading ID` and
    /// `MILLIS leader is ID` lines.
    pub fn lease_leader_command(
        &self,
        lease: &str,
        identity: &str,
        timing: [Duration; 3],
    ) -> Command {
        let mut cmd = Command::new(self.bin.join("lease-leader"));
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig().display()))
            .arg(format!("--lease={lease}"))
            .arg(format!("--identity={identity}"))
            .arg(format!("--lease-duration={}ms", timing[0].as_millis()))
            .arg(format!("--renew-deadline={}ms", timing[1].as_millis()))
            .arg(format!("--retry-period={}ms", timing[2].as_millis()));
        cmd
    }

    /// The API server's log so far.
    pub fn log(&self) -> String {
        self.apiserver
            .as_ref()
            .map(ServerProcess::log)
            .unwrap_or_default()
    }
}

/// The admin's bearer token (a throwaway for a loopback test server).
const ADMIN_TOKEN: &str = "lockward-test-admin-token";
/// The bearer token of the user with no rights.
const NOBODY_TOKEN: &str = "lockward-test-nobody-token";
