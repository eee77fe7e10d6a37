//! The doctor's checks of one Redis server: version, persistence,
//! replicas, clock.

use std::time::Instant;

use super::conn::Conn;
use super::url::RedisUrl;
use crate::finding::{clock_finding, local_ms, Finding, Level};

/// One server's `INFO` field.
fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

async fn query<T: redis::FromRedisValue>(conn: &Conn, cmd: &mut redis::Cmd) -> Option<T> {
    cmd.query_async(&mut conn.clone()).await.ok()
}

/// The findings of one server, labelled with `who`.
pub(crate) async fn server(url: &RedisUrl, who: &str) -> Vec<Finding> {
    let conn = match Conn::connect(url, None, false).await {
        Ok(c) => c,
        Err(e) => {
            return vec![Finding::new(
                Level::Error,
                &format!("{who}reachable"),
                e.to_string(),
            )]
        }
    };
    let mut out = Vec::new();
    let info: String = query(&conn, redis::cmd("INFO").arg("server"))
        .await
        .unwrap_or_default();
    let version = info_field(&info, "redis_version").unwrap_or_else(|| "unknown".into());
    out.push(Finding::new(
        Level::Ok,
        &format!("{who}version"),
        format!("Redis {version}"),
    ));
    // One pattern per call: Redis before 7 takes only one.
    let mut config: Vec<String> = Vec::new();
    for pattern in ["append*", "save", "min-replicas-to-write"] {
        let found: Option<Vec<String>> =
            query(&conn, redis::cmd("CONFIG").arg("GET").arg(pattern)).await;
        config.extend(found.unwrap_or_default());
    }
    let setting = |k: &str| {
        config
            .chunks(2)
            .find(|kv| kv[0] == k)
            .and_then(|kv| kv.get(1).cloned())
    };
    let persistence = Persistence::of(
        setting("appendonly").as_deref(),
        setting("appendfsync").as_deref(),
        setting("save").as_deref(),
    );
    out.push(persistence.finding(who));
    let replication: String = query(&conn, redis::cmd("INFO").arg("replication"))
        .await
        .unwrap_or_default();
    let replicas: u32 = info_field(&replication, "connected_slaves")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let role = info_field(&replication, "role").unwrap_or_default();
    if role == "slave" {
        out.push(
            Finding::new(
                Level::Error,
                &format!("{who}replication"),
                "this server is a replica",
            )
            .advise("point lockward at the primary"),
        );
    } else if replicas > 0 {
        // `slave0:ip=…,port=…,state=online,offset=…,lag=0`
        let lags: Vec<String> = (0..replicas)
            .filter_map(|i| info_field(&replication, &format!("slave{i}")))
            .filter_map(|line| {
                line.split(',')
                    .find_map(|kv| kv.strip_prefix("lag=").map(|l| format!("{l} s")))
            })
            .collect();
        let must = setting("min-replicas-to-write").unwrap_or_else(|| "0".into());
        out.push(
            Finding::new(
                Level::Warning,
                &format!("{who}replication"),
                format!(
                    "{replicas} replicas can be promoted (lag {}); asynchronous, min-replicas-to-write {must}",
                    lags.join(", ")
                ),
            )
            .advise("a failover can lose the last grants and admit a second holder (fences keep growing across it); fence your writes, or use redlock:// over independent masters"),
        );
    }
    let failover = replicas > 0 || url.sentinel.is_some();
    out.push(persistence.crash_finding(who, failover));
    let sent = Instant::now();
    let before = local_ms();
    if let Some((secs, micros)) = query::<(i64, i64)>(&conn, &mut redis::cmd("TIME")).await {
        let rtt = sent.elapsed().as_millis() as i64;
        let server_ms = secs * 1_000 + micros / 1_000;
        out.push(clock_finding(server_ms - (before + rtt / 2), rtt));
    }
    out
}

/// The findings of the server of `url` (the primary, for
/// `redis+sentinel://`), and of its sentinels.
pub(crate) async fn check(url: &RedisUrl) -> Vec<Finding> {
    let mut out = server(url, "").await;
    if url.sentinel.is_some() {
        out.extend(sentinels(url).await);
    }
    out
}

/// What the sentinels of `url` say: how many answer, whether they name one
/// primary, and whether they can agree on a failover (`SENTINEL CKQUORUM`).
async fn sentinels(url: &RedisUrl) -> Vec<Finding> {
    let Some(sentinel) = &url.sentinel else {
        return Vec::new();
    };
    let mut named = Vec::new();
    let mut quorum = None;
    for e in &url.endpoints {
        let mut settings = redis::RedisConnectionInfo::default();
        if let Some(user) = &sentinel.user {
            settings = settings.set_username(user);
        }
        if let Some(password) = &sentinel.password {
            settings = settings.set_password(password.expose());
        }
        let Ok(info) = redis::IntoConnectionInfo::into_connection_info(redis::ConnectionAddr::Tcp(
            e.host.clone(),
            e.port,
        )) else {
            continue;
        };
        let Ok(client) = redis::Client::open(info.set_redis_settings(settings)) else {
            continue;
        };
        let connected = tokio::time::timeout(
            super::conn::CONNECT_TIMEOUT,
            client.get_multiplexed_async_connection(),
        )
        .await;
        let Ok(Ok(mut c)) = connected else {
            continue;
        };
        let addr: Option<(String, String)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&sentinel.primary)
            .query_async(&mut c)
            .await
            .ok();
        if let Some((host, port)) = addr {
            named.push(format!("{host}:{port}"));
        }
        if quorum.is_none() {
            quorum = Some(
                redis::cmd("SENTINEL")
                    .arg("ckquorum")
                    .arg(&sentinel.primary)
                    .query_async::<String>(&mut c)
                    .await
                    .map_err(|e| e.to_string()),
            );
        }
    }
    let n = url.endpoints.len();
    let mut out = Vec::new();
    let mut distinct = named.clone();
    distinct.sort();
    distinct.dedup();
    out.push(match distinct.as_slice() {
        [] => Finding::new(
            Level::Error,
            "sentinels",
            format!("none of {n} names a primary called {:?}", sentinel.primary),
        )
        .advise("check the sentinels' addresses and the name they monitor the primary under"),
        [one] if named.len() == n => Finding::new(
            Level::Ok,
            "sentinels",
            format!("{n} of {n} name the primary {one}"),
        ),
        [one] => Finding::new(
            Level::Warning,
            "sentinels",
            format!("{} of {n} answer; they name the primary {one}", named.len()),
        )
        .advise("a sentinel that does not answer cannot vote in a failover"),
        many => Finding::new(
            Level::Warning,
            "sentinels",
            format!("they name different primaries: {}", many.join(", ")),
        )
        .advise("a failover is under way, or the sentinels were set up apart"),
    });
    match quorum {
        Some(Ok(text)) => out.push(Finding::new(Level::Ok, "sentinel quorum", text)),
        Some(Err(e)) => out.push(
            Finding::new(Level::Warning, "sentinel quorum", e)
                .advise("without a quorum the sentinels cannot fail the primary over"),
        ),
        None => {}
    }
    out
}

/// What a server keeps of its acknowledged writes across a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Persistence {
    /// An append-only file flushed on every write.
    AofAlways,
    /// An append-only file flushed about once a second (or when the
    /// operating system pleases).
    AofLazy,
    /// Snapshots (RDB) only: a restart brings back the last one.
    Snapshots,
    /// Nothing: a restart starts empty.
    None,
    /// `CONFIG GET` was refused.
    Unknown,
}

impl Persistence {
    fn of(appendonly: Option<&str>, appendfsync: Option<&str>, save: Option<&str>) -> Persistence {
        match (appendonly, appendfsync, save) {
            (Some("yes"), Some("always"), _) => Persistence::AofAlways,
            (Some("yes"), _, _) => Persistence::AofLazy,
            (Some(_), _, Some(save)) if !save.trim().is_empty() => Persistence::Snapshots,
            (Some(_), _, _) => Persistence::None,
            (None, _, _) => Persistence::Unknown,
        }
    }

    fn finding(self, who: &str) -> Finding {
        let check = format!("{who}persistence");
        match self {
            Persistence::AofAlways => Finding::new(
                Level::Ok,
                &check,
                "AOF with fsync always: locks and fence counters survive a crash",
            ),
            Persistence::AofLazy => Finding::new(Level::Warning, &check, "AOF without fsync always")
                .advise("a crash may lose the last second of locks; set appendfsync always for locks that must survive"),
            Persistence::Snapshots => Finding::new(Level::Warning, &check, "snapshots only (no AOF): a restart brings back the last snapshot")
                .advise("locks granted since the last snapshot are forgotten at a crash, and a second holder can get one while the first still works: fence your writes, or enable appendonly yes with appendfsync always"),
            Persistence::None => Finding::new(Level::Warning, &check, "no AOF and no snapshots: a restart frees every lock and semaphore permit")
                .advise("a restarted server lets a second holder in while the first still works: fence your writes, or enable appendonly yes with appendfsync always"),
            Persistence::Unknown => Finding::new(Level::Warning, &check, "CONFIG GET is not allowed; persistence unknown"),
        }
    }

    /// One sentence: what a crash (and a failover, when a replica can be
    /// promoted) of this deployment can lose, and that fences survive it.
    fn crash_finding(self, who: &str, failover: bool) -> Finding {
        let server = match self {
            Persistence::AofAlways => None,
            Persistence::AofLazy => Some("the last second of grants"),
            Persistence::Snapshots => Some("every grant since the last snapshot"),
            Persistence::None => Some("every lock and permit"),
            Persistence::Unknown => Some("what its persistence does not keep (unknown)"),
        };
        let lost = match (server, failover) {
            (None, false) => {
                return Finding::new(
                    Level::Ok,
                    &format!("{who}crash"),
                    "a crash loses no acknowledged grant; fences keep growing",
                )
            }
            (None, true) => {
                "a failover loses the grants the promoted replica had not received".to_string()
            }
            (Some(s), false) => format!("a crash loses {s}"),
            (Some(s), true) => format!(
                "a crash loses {s}, a failover the grants the promoted replica had not received"
            ),
        };
        Finding::new(
            Level::Warning,
            &format!("{who}crash"),
            format!("{lost}; fences still grow past every one granted (each is at least the server's clock in µs, see clock offset)"),
        )
        .advise("a lost lock can be granted again while its first holder still works: write through a fenced resource")
    }
}
