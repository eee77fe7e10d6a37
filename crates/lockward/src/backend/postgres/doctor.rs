//! PostgreSQL: version, durability settings, standbys, clock, poolers.

use std::time::Instant;

use super::core;
use super::url::{PostgresMode, PostgresUrl};
use crate::finding::{clock_finding, local_ms, Finding, Level};

pub(crate) async fn check(url: &PostgresUrl) -> Vec<Finding> {
    let address = url.to_string();
    let client = match core::open(url, &address, |_| {}, || {}).await {
        Ok(c) => c,
        Err(e) => return vec![Finding::new(Level::Error, "connect", e.to_string())],
    };
    let mut out = Vec::new();
    let show = |name: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(&format!("SHOW {name}"), &[])
                .await
                .ok()
                .map(|r| r.get::<_, String>(0))
        }
    };
    if let Some(v) = show("server_version").await {
        out.push(Finding::new(
            Level::Ok,
            "version",
            format!("PostgreSQL {v}"),
        ));
    }
    if url.mode == PostgresMode::Lease {
        out.push(if core::ends_idle_sessions(&client).await {
            Finding::new(
                Level::Ok,
                "waiting",
                "waiters take turns in the server's lock queue (a baton per name)",
            )
        } else {
            Finding::new(
                Level::Warning,
                "waiting",
                "before PostgreSQL 14 the server cannot end a stuck waiter's idle session: waiters poll the lock row",
            )
            .advise("upgrade to PostgreSQL 14 or later for pushed, ordered handoffs")
        });
    }
    match show("fsync").await.as_deref() {
        Some("off") => out.push(
            Finding::new(
                Level::Error,
                "fsync",
                "off: a crash can lose commits, fences included",
            )
            .advise("set fsync = on"),
        ),
        Some(v) => out.push(Finding::new(Level::Ok, "fsync", v)),
        None => {}
    }
    match show("synchronous_commit").await.as_deref() {
        Some("off") | Some("local") if url.mode == PostgresMode::Lease => out.push(
            Finding::new(
                Level::Error,
                "synchronous_commit",
                "off: a crash can lose the last grants and issue their fences again",
            )
            .advise("set synchronous_commit = on for lockward's role or database"),
        ),
        Some(v) => out.push(Finding::new(Level::Ok, "synchronous_commit", v)),
        None => {}
    }
    out.extend(standbys(&client).await);
    let sent = Instant::now();
    let before = local_ms();
    if let Ok(row) = client
        .query_one(
            "SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint",
            &[],
        )
        .await
    {
        let rtt = sent.elapsed().as_millis() as i64;
        out.push(clock_finding(
            row.get::<_, i64>(0) - (before + rtt / 2),
            rtt,
        ));
    }
    // Behind a transaction-mode pooler, consecutive transactions may run on
    // different server sessions: advisory locks then break.
    let mut pids = Vec::new();
    for _ in 0..4 {
        if let Ok(row) = client.query_one("SELECT pg_backend_pid()", &[]).await {
            pids.push(row.get::<_, i32>(0));
        }
    }
    pids.dedup();
    if pids.len() > 1 {
        let finding = Finding::new(
            if url.mode == PostgresMode::Advisory {
                Level::Error
            } else {
                Level::Warning
            },
            "pooler",
            "consecutive statements ran on different server sessions (a transaction-mode pooler)",
        );
        out.push(finding.advise(
            "advisory locks and lease mode's waiters need sessions of their own: connect directly or in session mode",
        ));
    } else {
        out.push(Finding::new(
            Level::Ok,
            "pooler",
            "one server session per connection",
        ));
    }
    out
}

/// What a failover to one of this server's standbys can lose. (A standby
/// itself does not get here: opening the store on it fails, saying it is
/// read-only.)
async fn standbys(client: &tokio_postgres::Client) -> Option<Finding> {
    let row = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')),
                    coalesce(max(extract(epoch FROM replay_lag)), 0)::float8
             FROM pg_stat_replication",
            &[],
        )
        .await
        .ok()?;
    let (all, synchronous, lag) = (
        row.get::<_, i64>(0),
        row.get::<_, i64>(1),
        row.get::<_, f64>(2),
    );
    Some(match (all, synchronous) {
        (0, _) => Finding::new(Level::Ok, "standbys", "none streams from this server"),
        (n, 0) => Finding::new(
            Level::Warning,
            "standbys",
            format!("{n} standbys, asynchronous (replay lag up to {lag:.3} s): a failover loses the grants a promoted standby had not received; fences still grow past every one granted"),
        )
        .advise("a lost lock can be granted again while its first holder still works: write through a fenced resource, or make a standby synchronous (synchronous_standby_names)"),
        (n, s) => Finding::new(
            Level::Ok,
            "standbys",
            format!("{n} standbys, {s} synchronous: a failover to a synchronous one loses no grant"),
        ),
    })
}
