//! MySQL and MariaDB: version, durability settings, clock, a proxy that
//! multiplexes sessions, and a probe of the lock table.

use std::time::Instant;

use mysql_async::prelude::Queryable;
use mysql_async::Params;

use super::core::Db;
use super::url::{MysqlMode, MysqlUrl};
use crate::finding::{clock_finding, local_ms, Finding, Level};

pub(crate) async fn check(url: &MysqlUrl) -> Vec<Finding> {
    let db = match Db::connect(url).await {
        Ok(db) => db,
        Err(e) => return vec![Finding::new(Level::Error, "connect", e.to_string())],
    };
    let mut out = Vec::new();
    let variable = |name: &'static str| {
        let db = &db;
        async move {
            db.rows::<String>(&format!("SELECT CAST(@@{name} AS CHAR)"), Params::Empty)
                .await
                .ok()
                .and_then(|rows| rows.into_iter().next())
        }
    };
    if let Some(v) = variable("version").await {
        let product = if v.contains("MariaDB") {
            "MariaDB"
        } else {
            "MySQL"
        };
        out.push(Finding::new(Level::Ok, "version", format!("{product} {v}")));
    }
    match variable("innodb_flush_log_at_trx_commit").await.as_deref() {
        Some("1") => out.push(Finding::new(
            Level::Ok,
            "innodb_flush_log_at_trx_commit",
            "1",
        )),
        Some(v) => out.push(
            Finding::new(
                Level::Error,
                "innodb_flush_log_at_trx_commit",
                format!("{v}: a crash can lose the last commits and issue their fences again"),
            )
            .advise("set innodb_flush_log_at_trx_commit = 1"),
        ),
        None => {}
    }
    // The binary log matters only where it is kept (replicas, backups).
    let binlog = variable("log_bin").await;
    match variable("sync_binlog").await.as_deref() {
        Some(v) if v != "1" && binlog.as_deref() == Some("1") => out.push(
            Finding::new(
                Level::Warning,
                "sync_binlog",
                format!("{v}: a crash can lose commits from the binary log that replicas follow"),
            )
            .advise("set sync_binlog = 1"),
        ),
        Some(v) => out.push(Finding::new(Level::Ok, "sync_binlog", v)),
        None => {}
    }
    let sent = Instant::now();
    let before = local_ms();
    let clock = db
        .rows::<i64>(
            "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
            Params::Empty,
        )
        .await;
    if let Some(server) = clock.ok().and_then(|rows| rows.into_iter().next()) {
        let rtt = sent.elapsed().as_millis() as i64;
        out.push(clock_finding(server - (before + rtt / 2), rtt));
    }
    // Behind a proxy that multiplexes (ProxySQL, say), consecutive
    // statements of one client connection may run on different server
    // sessions: named locks, and lease mode's baton, then break.
    let mut ids = Vec::new();
    if let Ok(mut session) = db.session(url).await {
        for _ in 0..4 {
            if let Ok(Some(id)) = session
                .query_first::<u64, _>("SELECT CONNECTION_ID()")
                .await
            {
                ids.push(id);
            }
        }
    }
    ids.dedup();
    match ids.len() {
        0 => {}
        1 => out.push(Finding::new(
            Level::Ok,
            "proxy",
            "one server session per connection",
        )),
        _ => {
            let level = if url.mode == MysqlMode::Named {
                Level::Error
            } else {
                Level::Warning
            };
            let finding = Finding::new(
                level,
                "proxy",
                "consecutive statements ran on different server sessions (a multiplexing proxy)",
            );
            out.push(finding.advise(
                "named locks need a session of their own: connect directly, or pin the connection",
            ));
        }
    }
    // The lock table answers: what every acquisition reads first.
    let probe = format!("SELECT COUNT(*) FROM {} WHERE name = ''", url.table);
    let sent = Instant::now();
    match db.rows::<u64>(&probe, Params::Empty).await {
        Ok(_) => out.push(Finding::new(
            Level::Ok,
            "probe",
            format!("the lock table answers in {:?}", sent.elapsed()),
        )),
        Err(e) => out.push(
            Finding::new(Level::Error, "probe", e.to_string())
                .advise("lockward creates its tables on first use: the user needs CREATE there"),
        ),
    }
    out
}
