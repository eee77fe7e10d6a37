//! `lockward run` and `lockward status` on `etcd://`.
#![cfg(feature = "etcd")]

mod common;

use common::check_run_and_status;
use lockward_testkit::EtcdCluster;

#[test]
fn run_and_status_on_etcd() {
    let etcd = EtcdCluster::start_single();
    check_run_and_status(&etcd.url(), "deploy", |_| {
        // etcdctl sees lockward's holder under the Go mutex layout.
        let keys = etcd.etcdctl(&["get", "--prefix", "--keys-only", "lockward/deploy/"]);
        assert!(keys.starts_with("lockward/deploy/"), "{keys}");
    });
}
