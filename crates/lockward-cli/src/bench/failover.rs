//! Leader failover of `lockward elect`, measured with real processes: a
//! leader and a waiting candidate; the time from the leader's end (kill -9,
//! three times in turn, or SIGTERM, which makes it resign) to the
//! candidate's command starting.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The failover times of one run.
#[derive(Debug, Clone)]
pub struct Failover {
    /// The leader killed with SIGKILL, its lease left to run out: the
    /// median of [`KILLS`] kills.
    pub after_kill: Duration,
    /// Each kill's failover, in order.
    pub kills: Vec<Duration>,
    /// The leader sent SIGTERM: its command stops and it resigns.
    pub after_resign: Duration,
}

/// How many leaders are killed in turn: a failover after a kill depends on
/// when, in its renewal period, the leader died.
pub const KILLS: usize = 3;

/// One `lockward elect` process whose command records, in a file named
/// after the candidate, the wall-clock moment it started.
struct Candidate {
    child: Child,
    marker: PathBuf,
}

impl Candidate {
    /// Starts candidate `id` and returns once it is campaigning.
    async fn start(
        url: &str,
        name: &str,
        id: &str,
        lease: Duration,
        dir: &Path,
    ) -> Result<Self, String> {
        let ms = |d: Duration| format!("{}ms", d.as_millis().max(1));
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find lockward itself: {e}"))?;
        let mut child = Command::new(exe)
            .args(["--store", url, "elect", name, "--identity", id])
            .args([
                "--lease",
                &ms(lease),
                "--renew-deadline",
                &ms(lease * 2 / 3),
            ])
            .args(["--retry", &ms(lease / 6), "--", "sh", "-c"])
            .arg("date +%s%N > \"$0/$LOCKWARD_IDENTITY\"; exec sleep 3600")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start lockward elect: {e}"))?;
        let stderr = child.stderr.take().expect("piped");
        // Ok once it campaigns; its last line when it ends before that.
        let (campaigning, wait) = tokio::sync::oneshot::channel::<Result<(), String>>();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut campaigning = Some(campaigning);
            let mut last = String::new();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("campaigns for") {
                    if let Some(tx) = campaigning.take() {
                        let _ = tx.send(Ok(()));
                    }
                }
                last = line;
            }
            if let Some(tx) = campaigning.take() {
                let _ = tx.send(Err(last));
            }
        });
        tokio::time::timeout(Duration::from_secs(20), wait)
            .await
            .map_err(|_| format!("candidate {id} did not start campaigning within 20 s"))?
            .map_err(|_| format!("candidate {id} exited before campaigning"))?
            .map_err(|last| format!("candidate {id} exited before campaigning: {last}"))?;
        // Its first acquire attempt is on its way once the line is out.
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(Self {
            child,
            marker: dir.join(id),
        })
    }

    /// When its command started, as nanoseconds since the epoch, waiting up
    /// to `within`.
    async fn led_at(&self, within: Duration) -> Result<u128, String> {
        let until = tokio::time::Instant::now() + within;
        loop {
            if let Ok(text) = std::fs::read_to_string(&self.marker) {
                if let Ok(ns) = text.trim().parse() {
                    return Ok(ns);
                }
            }
            if tokio::time::Instant::now() > until {
                return Err(format!(
                    "{} did not become leader within {within:?}",
                    self.marker.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Sends `signal` to the lockward process and returns the moment.
    fn signal(&self, signal: libc::c_int) -> u128 {
        let at = now_ns();
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) on a child this process started and still owns.
            unsafe { libc::kill(pid as libc::pid_t, signal) };
        }
        at
    }
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

fn between(from: u128, to: u128) -> Duration {
    Duration::from_nanos(u64::try_from(to.saturating_sub(from)).unwrap_or(u64::MAX))
}

/// Measures both failovers on election `name` with a lease of `lease`;
/// `settle` bounds each wait (the lease, or a ZooKeeper session, must run
/// out after a kill).
pub async fn failover(
    url: &str,
    name: &str,
    lease: Duration,
    settle: Duration,
) -> Result<Failover, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a directory: {e}"))?;
    let mut leader = Candidate::start(url, name, "c0", lease, dir.path()).await?;
    leader.led_at(settle).await?;
    let mut ended = Vec::new();
    let mut kills = Vec::new();
    for round in 1..=KILLS {
        let next = Candidate::start(url, name, &format!("c{round}"), lease, dir.path()).await?;
        let killed = leader.signal(libc::SIGKILL);
        kills.push(between(killed, next.led_at(settle).await?));
        ended.push(std::mem::replace(&mut leader, next));
    }
    let last = Candidate::start(url, name, "last", lease, dir.path()).await?;
    let resigned = leader.signal(libc::SIGTERM);
    let after_resign = between(resigned, last.led_at(settle).await?);
    last.signal(libc::SIGTERM);
    ended.extend([leader, last]);
    for mut c in ended {
        if tokio::time::timeout(Duration::from_secs(10), c.child.wait())
            .await
            .is_err()
        {
            let _ = c.child.kill().await;
        }
    }
    let mut sorted = kills.clone();
    sorted.sort_unstable();
    Ok(Failover {
        after_kill: sorted[KILLS / 2],
        kills,
        after_resign,
    })
}
