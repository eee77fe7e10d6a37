//! The doctor's checks of Redlock: each master as a Redis server, and how
//! many answer against the quorum.

use super::url::RedlockUrl;
use crate::backend::redis::doctor::server;
use crate::finding::{Finding, Level};

/// The findings of every master, and of the quorum.
pub(crate) async fn check(url: &RedlockUrl) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut reachable = 0;
    for endpoint in &url.masters {
        let found = server(&url.master(endpoint), &format!("{endpoint}: ")).await;
        if !found.iter().any(|f| f.check.ends_with("reachable")) {
            reachable += 1;
        }
        // Masters without AOF are Redlock's usual set-up: the fence's
        // second round survives them (see the advice below).
        out.extend(
            found
                .into_iter()
                .filter(|f| !f.check.ends_with("persistence")),
        );
    }
    let quorum = url.masters.len() / 2 + 1;
    let level = if reachable == url.masters.len() {
        Level::Ok
    } else if reachable >= quorum {
        Level::Warning
    } else {
        Level::Error
    };
    out.push(
        Finding::new(level, "masters", format!("{reachable} of {} reachable, {quorum} needed", url.masters.len()))
            .advise(if level == Level::Ok {
                "a master restarted without its data should stay out for one TTL (Redlock's delayed restart)"
            } else {
                "bring the missing masters back: with fewer than a majority nothing can be locked"
            }),
    );
    out
}
