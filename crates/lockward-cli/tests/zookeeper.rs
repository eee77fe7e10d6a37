//! `lockward run` and `lockward status` on `zk://`.
#![cfg(feature = "zookeeper")]

mod common;

use common::check_run_and_status;
use lockward_testkit::ZookeeperEnsemble;

#[test]
fn run_and_status_on_zookeeper() {
    let zk = ZookeeperEnsemble::start_single();
    check_run_and_status(&zk.url(), "deploy", |_| {
        // The server counts lockward's contender node among its ephemerals.
        let ephemerals = zk.four_letter(0, "dump");
        assert!(ephemerals.contains("/lockward/deploy/_c_"), "{ephemerals}");
    });
}
