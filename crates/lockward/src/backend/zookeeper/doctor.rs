//! ZooKeeper: each node's `srvr` (version, mode), the ensemble's size, and
//! the session timeout the servers grant.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::url::ZookeeperUrl;
use crate::finding::{Finding, Level};

/// A four-letter command's answer ("" when the node does not answer, or
/// does not allow the command).
pub(crate) async fn four_letter(host: &str, port: u16, command: &str) -> String {
    let talk = async {
        let mut s = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        s.write_all(command.as_bytes()).await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        Some(out)
    };
    tokio::time::timeout(Duration::from_secs(2), talk)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

pub(crate) async fn check(url: &ZookeeperUrl) -> Vec<Finding> {
    if url.tls {
        // Four-letter words are plain text; a TLS-only server does not
        // answer them on its secure port.
        return vec![Finding::new(
            Level::Ok,
            "tls",
            "the session is encrypted; node modes are not read over TLS (four-letter words are plain text)",
        )];
    }
    let mut out = Vec::new();
    let mut serving = 0;
    let mut leaders = 0;
    for e in &url.endpoints {
        let srvr = four_letter(&e.host, e.port, "srvr").await;
        let field = |name: &str| {
            srvr.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        match field("Mode:") {
            Some(mode) => {
                serving += 1;
                if mode == "leader" || mode == "standalone" {
                    leaders += 1;
                }
                let version = field("Zookeeper version:").unwrap_or_default();
                let version = version.split(['-', ',']).next().unwrap_or("").to_string();
                out.push(Finding::new(
                    Level::Ok,
                    &format!("{e}"),
                    format!("ZooKeeper {version}, {mode}"),
                ));
            }
            None if srvr.contains("not in the whitelist") => out.push(
                Finding::new(Level::Warning, &format!("{e}"), "srvr is not allowed")
                    .advise("add srvr to 4lw.commands.whitelist so its mode can be checked"),
            ),
            None => out.push(Finding::new(
                Level::Error,
                &format!("{e}"),
                "does not answer srvr",
            )),
        }
    }
    let n = url.endpoints.len();
    let level = match (n, serving) {
        (1, 1) => Level::Warning,
        (_, s) if s == n && n % 2 == 1 => Level::Ok,
        (_, s) if s > n / 2 => Level::Warning,
        _ => Level::Error,
    };
    let finding = Finding::new(
        level,
        "ensemble",
        format!("{serving} of {n} nodes serving, {leaders} leading"),
    );
    out.push(match level {
        Level::Warning if n == 1 => {
            finding.advise("one node is a single point of failure; run 3 or 5")
        }
        Level::Warning => {
            finding.advise("bring every node back: the ensemble tolerates no further failure")
        }
        Level::Error => finding.advise("no majority: no lock can be taken"),
        Level::Ok => finding,
    });
    out
}
