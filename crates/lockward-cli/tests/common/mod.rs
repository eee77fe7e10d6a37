//! Helpers shared by the CLI tests.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

/// The `lockward` binary under test.
pub fn lockward() -> &'static str {
    env!("CARGO_BIN_EXE_lockward")
}

/// Waits until `path` exists and returns its trimmed contents.
pub fn wait_for_file(path: &Path, within: Duration) -> String {
    let until = Instant::now() + within;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if !text.trim().is_empty() {
                return text.trim().to_string();
            }
        }
        assert!(Instant::now() < until, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` still exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until process `pid` is gone; false if it outlived `within`.
pub fn wait_gone(pid: u32, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// `lockward fence ACTION --db URL ARGS…`.
pub fn fence(db: &str, action: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(lockward())
        .args(["fence", action, "--db", db])
        .args(args)
        .output()
        .unwrap()
}

/// Checks that `lockward fence bench --json` succeeded and printed every
/// figure, each above 0.
pub fn assert_fence_bench_figures(out: &std::process::Output) {
    assert!(out.status.success(), "{out:?}");
    let figures: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for field in [
        "insert_plain_ms",
        "insert_guarded_ms",
        "updates_per_s_plain",
        "updates_per_s_guarded",
        "round_trip_us",
        "claim_us",
    ] {
        assert!(
            figures[field].as_f64().is_some_and(|v| v > 0.0),
            "{field}: {figures}"
        );
    }
}

/// Sends `signal` to each of `pids`, gone ones skipped.
pub fn signal_all(pids: &[u32], signal: libc::c_int) {
    for pid in pids {
        // SAFETY: kill(2) has no memory effects.
        unsafe { libc::kill(*pid as i32, signal) };
    }
}

/// Sends signal `sig` to process `pid`, which must exist.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) has no memory effects; the pid is a child of the test.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// Waits for `child` to exit; kills it and fails the test if it is still
/// running after `within`.
pub fn wait_exit(child: &mut std::process::Child, within: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= until {
            // Leave nothing running behind a failed test.
            let _ = child.kill();
            let _ = child.wait();
            panic!("lockward did not exit in {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A child process killed when this goes out of scope, so a failed assertion
/// leaves nothing running (a leftover child keeps the test's output pipe open
/// and the test run never ends).
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lockward run NAME` holds the lock on `store_url` while `during(fence)`
/// runs; meanwhile `status --json` must show the lock with that fence, and a
/// `--no-wait` run must exit 75.
pub fn check_run_and_status(store_url: &str, name: &str, during: impl FnOnce(u64)) {
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let mut holder = Command::new(lockward())
        .args(["--store", store_url, "run", name, "--ttl", "10s", "--"])
        .args([
            "sh",
            "-c",
            r#"echo "$LOCKWARD_FENCE" > "$1/fence"; sleep 5"#,
            "sh",
        ])
        .arg(dir.path())
        .spawn()
        .unwrap();
    let fence: u64 = wait_for_file(&dir.path().join("fence"), Duration::from_secs(10))
        .parse()
        .unwrap();
    let out = Command::new(lockward())
        .args(["--store", store_url, "status", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = rows
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("{name} not in status on {store_url}: {rows}"));
    assert_eq!(row["fence"].as_u64(), Some(fence), "{store_url}");
    let busy = Command::new(lockward())
        .args(["--store", store_url, "run", name, "--no-wait", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(busy.status.code(), Some(75), "{store_url}");
    during(fence);
    holder.kill().unwrap();
    holder.wait().unwrap();
}

/// One server of every backend this build has, and a URL for each store
/// on them (SQLite in `dir`; PostgreSQL in both modes). The servers stop
/// when this is dropped.
pub struct EveryStore {
    pub urls: Vec<String>,
    _servers: Vec<Box<dyn std::any::Any>>,
}

pub fn every_store(dir: &Path) -> EveryStore {
    let mut urls = vec![format!("sqlite://{}", dir.join("l.db").display())];
    let mut servers: Vec<Box<dyn std::any::Any>> = Vec::new();
    #[cfg(feature = "redis")]
    {
        let redis = lockward_testkit::RedisServer::start();
        let masters = lockward_testkit::RedisMasters::start(3, Default::default());
        urls.extend([redis.url(), masters.url()]);
        servers.push(Box::new(redis));
        servers.push(Box::new(masters));
    }
    #[cfg(feature = "etcd")]
    {
        let etcd = lockward_testkit::EtcdCluster::start_single();
        urls.push(etcd.url());
        servers.push(Box::new(etcd));
    }
    #[cfg(feature = "zookeeper")]
    {
        let zk = lockward_testkit::ZookeeperEnsemble::start_single();
        urls.push(zk.url());
        servers.push(Box::new(zk));
    }
    #[cfg(feature = "postgres")]
    {
        let pg = lockward_testkit::PostgresServer::start();
        urls.extend([pg.url(), format!("{}?mode=advisory", pg.url())]);
        servers.push(Box::new(pg));
    }
    #[cfg(feature = "mysql")]
    {
        let mysql = lockward_testkit::MariadbServer::start();
        urls.extend([mysql.url(), format!("{}?mode=named", mysql.url())]);
        servers.push(Box::new(mysql));
    }
    #[cfg(feature = "kubernetes")]
    {
        let kube = lockward_testkit::KubeApiServer::start();
        urls.push(kube.url());
        servers.push(Box::new(kube));
    }
    EveryStore {
        urls,
        _servers: servers,
    }
}

/// Whether the store's locks live in the holder's database session
/// (PostgreSQL advisory, MySQL named): no TTL, no forced unlock.
pub fn session_locks(url: &str) -> bool {
    url.contains("mode=advisory") || url.contains("mode=named")
}

/// This process's own cgroup v2 directory, or why there is none.
pub fn own_cgroup_dir() -> Result<std::path::PathBuf, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let mount = mountinfo
        .lines()
        .find_map(|l| {
            let (before, after) = l.split_once(" - ")?;
            (after.split_whitespace().next()? == "cgroup2")
                .then(|| before.split_whitespace().nth(4).map(str::to_string))?
        })
        .ok_or("no cgroup v2 file system is mounted")?;
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| e.to_string())?
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_string))
        .ok_or("this process is in no cgroup v2")?;
    Ok(Path::new(&mount).join(own.trim_start_matches('/')))
}

/// A terminal for a test: one tmux session on a server (socket) of its own,
/// killed when dropped.
pub struct Tmux {
    socket: String,
    session: String,
}

impl Tmux {
    /// A tmux server for session `session`, not started yet.
    pub fn new(session: &str) -> Tmux {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        Tmux {
            socket: format!(
                "lockward-test-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
            session: session.to_string(),
        }
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs (scripts/install-test-deps.sh installs it)")
    }

    /// Runs the shell command `line` in a 160×40 terminal.
    pub fn start(&self, line: &str) {
        let started = self.run(&[
            "new-session",
            "-d",
            "-s",
            &self.session,
            "-x",
            "160",
            "-y",
            "40",
            line,
        ]);
        assert!(started.status.success(), "{started:?}");
    }

    /// Types `keys` (tmux key names: `q`, `Enter`, `C-c`).
    pub fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", &self.session, keys]);
    }

    /// What the terminal shows now.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .run(&["capture-pane", "-p", "-t", &self.session])
                .stdout,
        )
        .into()
    }

    /// Waits until the screen satisfies `ok`, and returns it.
    pub fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(Instant::now() < until, "never {what}:\n{screen}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}
