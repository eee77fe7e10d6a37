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
    let config: Vec<String> = query(&conn, redis::cmd("CONFIG").arg("GET").arg("append*"))
        .await
        .unwrap_or_default();
    let setting = |k: &str| {
        config
            .chunks(2)
            .find(|kv| kv[0] == k)
            .and_then(|kv| kv.get(1).cloned())
    };
    match (setting("appendonly").as_deref(), setting("appendfsync").as_deref()) {
        (Some("yes"), Some("always")) => out.push(Finding::new(
            Level::Ok,
            &format!("{who}persistence"),
            "AOF with fsync always: locks and fence counters survive a crash",
        )),
        (Some("yes"), Some(fsync)) => out.push(
            Finding::new(Level::Warning, &format!("{who}persistence"), format!("AOF with fsync {fsync}"))
                .advise("a crash may lose the last second of locks; fences keep growing (each one at least the server's TIME in µs); set appendfsync always for locks that must survive"),
        ),
        (Some(_), _) => out.push(
            Finding::new(Level::Warning, &format!("{who}persistence"), "no AOF: a restart frees every lock and semaphore permit")
                .advise("a restarted server lets a second holder in while the first still works: fence your writes, or enable appendonly yes with appendfsync always"),
        ),
        _ => out.push(Finding::new(
            Level::Warning,
            &format!("{who}persistence"),
            "CONFIG GET is not allowed; persistence unknown",
        )),
    }
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
        out.push(
            Finding::new(Level::Warning, &format!("{who}replication"), format!("{replicas} replicas can be promoted"))
                .advise("replication is asynchronous: a failover can lose a lock and admit a second holder; fence your writes, or use redlock:// over independent masters"),
        );
    }
    let sent = Instant::now();
    let before = local_ms();
    if let Some((secs, micros)) = query::<(i64, i64)>(&conn, &mut redis::cmd("TIME")).await {
        let rtt = sent.elapsed().as_millis() as i64;
        let server_ms = secs * 1_000 + micros / 1_000;
        out.push(clock_finding(server_ms - (before + rtt / 2), rtt));
    }
    out
}

/// The findings of the server of `url`.
pub(crate) async fn check(url: &RedisUrl) -> Vec<Finding> {
    server(url, "").await
}
