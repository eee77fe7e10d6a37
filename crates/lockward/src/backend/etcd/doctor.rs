//! etcd: version, members, leader.

use super::url::EtcdUrl;
use crate::finding::{Finding, Level};

pub(crate) async fn check(url: &EtcdUrl) -> Vec<Finding> {
    let mut client = match crate::backend::etcd::side_client(url).await {
        Ok(c) => c,
        Err(e) => return vec![Finding::new(Level::Error, "cluster", e.to_string())],
    };
    let mut out = Vec::new();
    match client.status().await {
        Ok(status) => {
            out.push(Finding::new(
                Level::Ok,
                "version",
                format!("etcd {}", status.version()),
            ));
            if status.leader() == 0 {
                out.push(
                    Finding::new(Level::Error, "leader", "the cluster has no leader")
                        .advise("no lock can be taken until a majority of members is back"),
                );
            } else {
                out.push(Finding::new(
                    Level::Ok,
                    "leader",
                    format!("member {:x}", status.leader()),
                ));
            }
        }
        Err(e) => out.push(Finding::new(Level::Error, "status", e.to_string())),
    }
    match client.member_list().await {
        Ok(list) => {
            let n = list.members().len();
            let finding = Finding::new(
                if n >= 3 && n % 2 == 1 {
                    Level::Ok
                } else {
                    Level::Warning
                },
                "members",
                format!("{n} members: {} may fail", (n.max(1) - 1) / 2),
            );
            out.push(match n {
                1 => finding.advise("one member: it is a single point of failure; run 3 or 5"),
                n if n % 2 == 0 => finding.advise("an even count tolerates no more failures than one member fewer; run an odd number"),
                _ => finding,
            });
        }
        Err(e) => out.push(Finding::new(Level::Warning, "members", e.to_string())),
    }
    out
}
