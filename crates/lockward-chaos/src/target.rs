//! The system under test for each backend: its servers (from the testkit),
//! a proxy in front of every server, the URL clients use, and the faults
//! that apply to it. (Redis Sentinel's clients reach the data nodes at the
//! addresses the sentinels name, so that backend has no proxy faults; the
//! PostgreSQL and MariaDB failover backends move their proxy to the copy
//! they promote, as a failover moves a service's address.)

use std::time::{Duration, Instant};

use lockward_testkit::{
    EtcdCluster, KubeApiServer, MariadbServer, PostgresServer, RedisMasters, RedisOptions,
    RedisSentinels, RedisServer, ZookeeperEnsemble,
};
use serde::Serialize;

use crate::proxy::{Mode, Proxy};

/// The backends the harness runs on.
pub const BACKENDS: &[&str] = &[
    "sqlite",
    "redis",
    "redis-persistent",
    "redis-sentinel",
    "redlock",
    "etcd",
    "zookeeper",
    "postgres",
    "postgres-failover",
    "mysql",
    "mysql-failover",
    "k8s",
];

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A client stopped with SIGSTOP for 0.5–3× the TTL.
    PauseClient,
    /// The server killed with kill -9 and restarted.
    KillServer,
    /// Every connection through the proxy closed, new ones refused.
    CutConnections,
    /// Every byte through the proxy held back 50–200 ms.
    DelayConnections,
    /// Nothing through the proxy, connections left open.
    Blackhole,
    /// The server restarted with its clock jumped forward or back
    /// (libfaketime): the lease expiry of PostgreSQL and MySQL runs on it.
    ClockJump,
    /// The cluster's leader killed with kill -9 and restarted.
    KillLeader,
    /// A minority of the masters killed and restarted (no persistence).
    KillMinority,
    /// The holders of the fenced, control, election and read-write locks,
    /// and one semaphore holder, ended by an operator
    /// (`Store::force_unlock`) while they work.
    ForcedUnlock,
    /// The last writes lost. Redis Sentinel, a PostgreSQL standby, a
    /// MariaDB replica: every copy stopped from receiving while the
    /// primary works on alone, the primary killed with kill -9, and a copy
    /// that missed those writes promoted. One Redis: a snapshot (`SAVE`),
    /// the server working on, then killed with kill -9 and restarted from
    /// that snapshot (the default persistence of a Redis).
    LoseRecentWrites,
}

/// One fault that happened, with its proof.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    /// What it was.
    pub kind: FaultKind,
    /// When it started and healed, ns on the monotonic clock.
    pub start: u64,
    /// When it healed.
    pub healed: u64,
    /// What shows it happened.
    pub proof: String,
    /// The semaphore and read-write holds a forced unlock ended (their
    /// checks end those holds there, by the operator's decision).
    pub ended_holds: Vec<crate::forced::EndedHold>,
    /// When the store forgot what it had granted, where that is not the
    /// fault's start: the moment the primary was killed (Redis Sentinel),
    /// or a copy that lacked the last writes was promoted (PostgreSQL,
    /// MariaDB), or the server restarted from its snapshot.
    pub forgot_at: Option<u64>,
}

enum Servers {
    Embedded,
    Redis(RedisServer),
    Masters(RedisMasters),
    Etcd(EtcdCluster),
    Zookeeper(ZookeeperEnsemble),
    Postgres(PostgresServer),
    Mariadb(MariadbServer),
    Kube(KubeApiServer),
    Sentinels(RedisSentinels),
    /// A PostgreSQL primary and its streaming standby.
    PostgresPair {
        primary: PostgresServer,
        standby: PostgresServer,
    },
    /// A MariaDB primary and its replica.
    MariadbPair {
        primary: MariadbServer,
        replica: MariadbServer,
    },
}

/// A backend ready for a run.
pub struct Target {
    /// The backend's name.
    pub name: String,
    /// The store URL clients use (through the proxies).
    pub url: String,
    /// Faults that apply, besides pausing clients.
    pub faults: Vec<FaultKind>,
    /// How long after a fault heals the store may take to serve again
    /// (I6 allows TTL + this).
    pub failover: Duration,
    servers: Servers,
    proxies: Vec<Proxy>,
    /// The server's clock offset (s) after the last clock jump.
    clock_offset: i64,
    _dir: tempfile::TempDir,
}

/// Takes a snapshot of `server` (`SAVE`), lets the run write on for
/// `hold`, kills it with kill -9 and restarts it from that snapshot, which
/// is then deleted (a later kill forgets everything again, as this
/// backend's servers run without persistence). The proof, and when the
/// store forgot.
async fn restart_from_a_snapshot(server: &mut RedisServer, hold: Duration) -> (String, u64) {
    let saved = tokio::task::block_in_place(|| server.cli(&["SAVE"]));
    let keys_at_save = tokio::task::block_in_place(|| server.cli(&["DBSIZE"]));
    tokio::time::sleep(hold).await;
    let pid = server.pid();
    server.kill9();
    let forgot = crate::history::mono_ns();
    tokio::task::block_in_place(|| server.restart());
    let dir = tokio::task::block_in_place(|| server.cli(&["CONFIG", "GET", "dir"]));
    let removed = dir
        .lines()
        .nth(1)
        .map(|d| std::fs::remove_file(std::path::Path::new(d).join("dump.rdb")).is_ok());
    let keys_after = tokio::task::block_in_place(|| server.cli(&["DBSIZE"]));
    (
        format!(
            "SAVE ({saved}, {keys_at_save} keys); {hold:?} later pid {pid:?} killed with SIGKILL and restarted from the snapshot ({keys_after} keys; snapshot removed: {removed:?})"
        ),
        forgot,
    )
}

fn hosts(proxies: &[Proxy]) -> String {
    proxies
        .iter()
        .map(Proxy::addr)
        .collect::<Vec<_>>()
        .join(",")
}

impl Target {
    /// The faults besides client pauses that apply to backend `name`.
    pub fn kinds(name: &str) -> Vec<FaultKind> {
        let proxied = [
            FaultKind::CutConnections,
            FaultKind::DelayConnections,
            FaultKind::Blackhole,
        ];
        let own: &[FaultKind] = match name {
            // The primary killed (a failover), or killed after the replicas
            // fell behind; no proxy between the clients and the data nodes.
            "redis-sentinel" => {
                return vec![
                    FaultKind::KillServer,
                    FaultKind::LoseRecentWrites,
                    FaultKind::ForcedUnlock,
                ]
            }
            // A copy that fell behind promoted, the proxy moved to it.
            "postgres-failover" | "mysql-failover" => &[FaultKind::LoseRecentWrites],
            // k8s: kube-apiserver killed; its etcd keeps every Lease.
            // redis: without persistence a restart forgets everything; a
            // restart from the last snapshot brings back older counters.
            "redis" => &[FaultKind::KillServer, FaultKind::LoseRecentWrites],
            "redis-persistent" | "k8s" => &[FaultKind::KillServer],
            // The lease backends time expiry by the server's clock.
            "postgres" | "mysql" => &[FaultKind::KillServer, FaultKind::ClockJump],
            "redlock" => &[FaultKind::KillMinority],
            "etcd" | "zookeeper" => &[FaultKind::KillLeader],
            // Embedded: nothing between the clients and the file.
            _ => return vec![FaultKind::ForcedUnlock],
        };
        let every = [FaultKind::ForcedUnlock];
        own.iter().chain(&proxied).chain(&every).copied().collect()
    }

    /// Whether `kind` can end every lease early without the holders
    /// knowing: a restart without persistence forgets every lock, and a
    /// server clock jumped forward expires leases the server times. Only
    /// fences protect across such a fault.
    pub fn forgets_locks(&self, kind: FaultKind) -> bool {
        let lost_by_failover = self.name == "redis-sentinel"
            && matches!(kind, FaultKind::KillServer | FaultKind::LoseRecentWrites);
        (self.name == "redis" && kind == FaultKind::KillServer)
            || kind == FaultKind::ClockJump
            || kind == FaultKind::LoseRecentWrites
            || lost_by_failover
    }

    /// Starts `name`'s servers and proxies.
    pub async fn start(name: &str) -> Result<Target, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut proxies = Vec::new();
        let (servers, url, failover) = match name {
            "sqlite" => (
                Servers::Embedded,
                format!("sqlite://{}", dir.path().join("locks.db").display()),
                Duration::ZERO,
            ),
            "redis" | "redis-persistent" => {
                let server = RedisServer::start_with(RedisOptions {
                    persistent: name == "redis-persistent",
                    ..Default::default()
                });
                proxies.push(proxy(server.addr()).await?);
                (
                    Servers::Redis(server),
                    format!("redis://{}", hosts(&proxies)),
                    Duration::from_secs(2),
                )
            }
            "redis-sentinel" => {
                let set = tokio::task::block_in_place(|| RedisSentinels::start(2));
                let url = set.url();
                (Servers::Sentinels(set), url, Duration::from_secs(5))
            }
            "redlock" => {
                let masters = RedisMasters::start(5, RedisOptions::default());
                for addr in masters.url().trim_start_matches("redlock://").split(',') {
                    proxies.push(proxy(addr.to_string()).await?);
                }
                (
                    Servers::Masters(masters),
                    format!("redlock://{}", hosts(&proxies)),
                    Duration::from_secs(2),
                )
            }
            "etcd" => {
                let etcd = EtcdCluster::start_three();
                for e in etcd.endpoints() {
                    proxies.push(proxy(e).await?);
                }
                (
                    Servers::Etcd(etcd),
                    format!("etcd://{}", hosts(&proxies)),
                    Duration::from_secs(3),
                )
            }
            "zookeeper" => {
                let zk = ZookeeperEnsemble::start_three();
                for e in zk.endpoints() {
                    proxies.push(proxy(e).await?);
                }
                (
                    Servers::Zookeeper(zk),
                    // Sessions as long as the TTL: a stopped client loses its
                    // nodes as soon as its lease would have run out.
                    format!("zk://{}?session_timeout=1s", hosts(&proxies)),
                    Duration::from_secs(4),
                )
            }
            "postgres" => {
                // Durable settings: with synchronous_commit=off a kill -9 loses the
                // last commits, and the fence sequence with them (found here).
                let pg = PostgresServer::start_durable();
                proxies.push(proxy(pg.addr()).await?);
                let url = pg.url().replace(&pg.addr(), &proxies[0].addr());
                (Servers::Postgres(pg), url, Duration::from_secs(3))
            }
            "postgres-failover" => {
                let primary = PostgresServer::start_durable();
                let standby =
                    tokio::task::block_in_place(|| PostgresServer::start_standby(&primary));
                proxies.push(proxy(primary.addr()).await?);
                let url = primary.url().replace(&primary.addr(), &proxies[0].addr());
                let pair = Servers::PostgresPair { primary, standby };
                (pair, url, Duration::from_secs(5))
            }
            "mysql-failover" => {
                let primary = tokio::task::block_in_place(MariadbServer::start_primary);
                let replica =
                    tokio::task::block_in_place(|| MariadbServer::start_replica_of(&primary));
                proxies.push(proxy(primary.addr()).await?);
                let url = primary.url().replace(&primary.addr(), &proxies[0].addr());
                let pair = Servers::MariadbPair { primary, replica };
                (pair, url, Duration::from_secs(5))
            }
            "mysql" => {
                // Every commit flushed: a kill -9 must not lose fences.
                let db = tokio::task::block_in_place(MariadbServer::start_durable);
                proxies.push(proxy(db.addr()).await?);
                let url = db.url().replace(&db.addr(), &proxies[0].addr());
                (Servers::Mariadb(db), url, Duration::from_secs(3))
            }
            "k8s" => {
                let kube = tokio::task::block_in_place(KubeApiServer::start);
                proxies.push(proxy(kube.addr()).await?);
                let url = kube.url_via(&proxies[0].addr());
                (Servers::Kube(kube), url, Duration::from_secs(3))
            }
            other => {
                return Err(format!(
                    "unknown backend {other:?}; one of {}",
                    BACKENDS.join(", ")
                ))
            }
        };
        let faults = Target::kinds(name);
        Ok(Target {
            name: name.to_string(),
            url,
            faults,
            failover,
            servers,
            proxies,
            clock_offset: 0,
            _dir: dir,
        })
    }

    /// Applies one server-side fault for about `hold`, heals it, and says
    /// how it went.
    pub async fn inflict(&mut self, kind: FaultKind, hold: Duration) -> FaultRecord {
        let start = crate::history::mono_ns();
        let mut ended_holds = Vec::new();
        let mut forgot_at = None;
        let proof = match kind {
            FaultKind::CutConnections | FaultKind::DelayConnections | FaultKind::Blackhole => {
                let mode = match kind {
                    FaultKind::CutConnections => Mode::Drop,
                    FaultKind::DelayConnections => Mode::Delay,
                    _ => Mode::Blackhole,
                };
                let before: u64 = self
                    .proxies
                    .iter()
                    .map(|p| p.cut.load(std::sync::atomic::Ordering::SeqCst))
                    .sum();
                for p in &self.proxies {
                    p.set(mode);
                }
                tokio::time::sleep(hold).await;
                for p in &self.proxies {
                    p.set(Mode::Pass);
                }
                let after: u64 = self
                    .proxies
                    .iter()
                    .map(|p| p.cut.load(std::sync::atomic::Ordering::SeqCst))
                    .sum();
                format!(
                    "{mode:?} on {} proxies for {hold:?}; {} connections cut",
                    self.proxies.len(),
                    after - before
                )
            }
            FaultKind::KillServer | FaultKind::LoseRecentWrites
                if matches!(self.servers, Servers::Sentinels(_)) =>
            {
                let Servers::Sentinels(set) = &mut self.servers else {
                    unreachable!("matched above")
                };
                let before = set.primary_port();
                let pid = before.and_then(|p| set.pid(p));
                let (old, new) = tokio::task::block_in_place(|| {
                    if kind == FaultKind::KillServer {
                        set.kill_primary()
                    } else {
                        set.promote_a_lagging_replica(hold)
                    }
                });
                // Forgotten from the kill on: a client may be granted on
                // the new primary (it hears the sentinels' +switch-master)
                // before the sentinels' answers show the failover here.
                let since_kill = set
                    .killed_at()
                    .map_or(0, |at| u64::try_from(at.elapsed().as_nanos()).unwrap_or(u64::MAX));
                forgot_at = Some(crate::history::mono_ns().saturating_sub(since_kill));
                let gone = pid.is_some_and(|p| !alive(p));
                tokio::task::block_in_place(|| set.restart_node(old));
                format!(
                    "primary {old} (pid {pid:?}) killed with SIGKILL (gone: {gone}){}; the sentinels promoted {new}; {old} back as a replica",
                    if kind == FaultKind::LoseRecentWrites {
                        format!(" after its replicas were stopped for {hold:?}")
                    } else {
                        String::new()
                    }
                )
            }
            FaultKind::LoseRecentWrites
                if matches!(
                    self.servers,
                    Servers::PostgresPair { .. } | Servers::MariadbPair { .. }
                ) =>
            {
                let (proof, forgot) = self.promote_a_lagging_copy(hold).await;
                forgot_at = Some(forgot);
                proof
            }
            FaultKind::LoseRecentWrites if matches!(self.servers, Servers::Redis(_)) => {
                let Servers::Redis(server) = &mut self.servers else {
                    unreachable!("matched above")
                };
                let (proof, forgot) = restart_from_a_snapshot(server, hold).await;
                forgot_at = Some(forgot);
                proof
            }
            FaultKind::LoseRecentWrites => {
                "only Redis, Redis Sentinel's replicas, PostgreSQL standbys and MariaDB replicas lose writes here"
                    .into()
            }
            FaultKind::KillServer => {
                let pid = self.kill_server();
                tokio::time::sleep(hold).await;
                let gone = pid.is_some_and(|p| !alive(p));
                self.restart_server();
                format!("pid {pid:?} killed with SIGKILL (gone: {gone}), restarted after {hold:?}")
            }
            FaultKind::ClockJump => {
                // Forward: every lease looks expired early, so a second
                // holder can start while the first is within its deadline
                // (only fences protect then); back again: leases last longer.
                self.clock_offset = if self.clock_offset == 0 { 3 } else { 0 };
                let spec = format!("{:+}s", self.clock_offset);
                let clock = (self.clock_offset != 0).then_some(spec.as_str());
                match &mut self.servers {
                    Servers::Postgres(pg) => {
                        tokio::task::block_in_place(|| pg.restart_with_clock(clock))
                    }
                    Servers::Mariadb(db) => {
                        tokio::task::block_in_place(|| db.restart_with_clock(clock))
                    }
                    _ => {}
                }
                tokio::time::sleep(hold).await;
                format!(
                    "restarted under faketime {spec}; server clock − host clock = {:?} s",
                    self.server_skew()
                )
            }
            FaultKind::KillLeader => {
                let (leader, pid) = self.kill_leader();
                tokio::time::sleep(hold).await;
                let gone = pid.is_some_and(|p| !alive(p));
                self.restart_member(leader);
                format!("leader {leader:?} (pid {pid:?}) killed with SIGKILL (gone: {gone}), restarted after {hold:?}")
            }
            FaultKind::KillMinority => {
                let mut killed = Vec::new();
                if let Servers::Masters(m) = &mut self.servers {
                    let masters = m.masters();
                    let n = masters.len();
                    let first = fastrand::usize(0..n);
                    for i in [first, (first + 1) % n] {
                        killed.push((i, masters[i].pid()));
                        masters[i].kill9();
                    }
                    tokio::time::sleep(hold).await;
                    for (i, _) in &killed {
                        tokio::task::block_in_place(|| masters[*i].restart());
                    }
                }
                format!("masters {killed:?} (index, pid) killed with SIGKILL, restarted without their data after {hold:?}")
            }
            FaultKind::ForcedUnlock => {
                let (proof, fences) = crate::forced::force_unlock(&self.url).await;
                ended_holds = fences;
                proof
            }
            FaultKind::PauseClient => "paused by the run, not the target".into(),
        };
        FaultRecord {
            kind,
            start,
            healed: crate::history::mono_ns(),
            proof,
            ended_holds,
            forgot_at,
        }
    }

    /// The copy (standby, replica) stops receiving while the primary
    /// works on alone for `hold`; the primary is killed with kill -9, the
    /// copy promoted and the proxy moved to it, and a new copy of it made
    /// for the next time. The proof, and when the store forgot.
    async fn promote_a_lagging_copy(&mut self, hold: Duration) -> (String, u64) {
        let proxy = &self.proxies[0];
        match &mut self.servers {
            Servers::PostgresPair { primary, standby } => {
                tokio::task::block_in_place(|| primary.pause_wal_senders());
                tokio::time::sleep(hold).await;
                let pid = primary.pid();
                tokio::task::block_in_place(|| {
                    primary.kill9();
                    standby.promote();
                });
                let forgot = crate::history::mono_ns();
                proxy.retarget(standby.addr());
                let gone = pid.is_some_and(|p| !alive(p));
                let fresh = tokio::task::block_in_place(|| PostgresServer::start_standby(standby));
                *primary = std::mem::replace(standby, fresh);
                let proof = format!(
                    "the standby stopped receiving for {hold:?}; the primary (pid {pid:?}) killed with SIGKILL (gone: {gone}); the standby promoted and the proxy moved to it; a new standby made"
                );
                (proof, forgot)
            }
            Servers::MariadbPair { primary, replica } => {
                tokio::task::block_in_place(|| replica.stop_replicating());
                tokio::time::sleep(hold).await;
                let pid = primary.pid();
                tokio::task::block_in_place(|| {
                    primary.kill9();
                    replica.promote();
                });
                let forgot = crate::history::mono_ns();
                proxy.retarget(replica.addr());
                let gone = pid.is_some_and(|p| !alive(p));
                let fresh =
                    tokio::task::block_in_place(|| MariadbServer::start_replica_of(replica));
                *primary = std::mem::replace(replica, fresh);
                let proof = format!(
                    "the replica stopped replicating for {hold:?}; the primary (pid {pid:?}) killed with SIGKILL (gone: {gone}); the replica promoted and the proxy moved to it; a new replica made"
                );
                (proof, forgot)
            }
            _ => ("no copy to promote".into(), crate::history::mono_ns()),
        }
    }

    fn kill_server(&mut self) -> Option<u32> {
        match &mut self.servers {
            Servers::Redis(r) => {
                let pid = r.pid();
                r.kill9();
                pid
            }
            Servers::Postgres(pg) => {
                let pid = pg.pid();
                pg.kill9();
                pid
            }
            Servers::Mariadb(db) => {
                let pid = db.pid();
                db.kill9();
                pid
            }
            Servers::Kube(k) => {
                let pid = k.apiserver_pid();
                k.kill_apiserver();
                pid
            }
            _ => None,
        }
    }

    fn restart_server(&mut self) {
        match &mut self.servers {
            Servers::Redis(r) => tokio::task::block_in_place(|| r.restart()),
            Servers::Postgres(pg) => tokio::task::block_in_place(|| pg.restart()),
            Servers::Mariadb(db) => tokio::task::block_in_place(|| db.restart()),
            Servers::Kube(k) => tokio::task::block_in_place(|| k.start_apiserver()),
            _ => {}
        }
    }

    fn kill_leader(&mut self) -> (Option<usize>, Option<u32>) {
        match &mut self.servers {
            Servers::Etcd(e) => {
                let leader = e.leader();
                let pid = leader.and_then(|i| e.pid(i));
                if let Some(i) = leader {
                    e.kill9(i);
                }
                (leader, pid)
            }
            Servers::Zookeeper(z) => {
                let leader = z.leader();
                let pid = leader.and_then(|i| z.pid(i));
                if let Some(i) = leader {
                    z.kill9(i);
                }
                (leader, pid)
            }
            _ => (None, None),
        }
    }

    fn restart_member(&mut self, member: Option<usize>) {
        let Some(i) = member else { return };
        match &mut self.servers {
            Servers::Etcd(e) => tokio::task::block_in_place(|| e.restart(i)),
            Servers::Zookeeper(z) => tokio::task::block_in_place(|| z.restart(i)),
            _ => {}
        }
    }

    /// The server's clock minus the host's wall clock, in seconds.
    fn server_skew(&self) -> Option<i64> {
        let server: i64 = match &self.servers {
            Servers::Postgres(pg) | Servers::PostgresPair { primary: pg, .. } => {
                pg.psql("SELECT extract(epoch from clock_timestamp())::bigint")
            }
            Servers::Mariadb(db) | Servers::MariadbPair { primary: db, .. } => {
                db.sql("SELECT UNIX_TIMESTAMP()")
            }
            _ => return None,
        }
        .trim()
        .parse()
        .ok()?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs() as i64;
        Some(server - now)
    }
}

async fn proxy(target: String) -> Result<Proxy, String> {
    Proxy::start(target)
        .await
        .map_err(|e| format!("proxy: {e}"))
}

/// Whether process `pid` exists.
pub fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
            })
            != Some(true)
}

/// Waits until `/proc` shows `pid` stopped (state `T`), up to `within`.
pub fn wait_stopped(pid: u32, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.trim_start().chars().next())
            });
        if state == Some('T') {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}
