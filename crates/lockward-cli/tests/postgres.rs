//! `lockward run` and `lockward status` on `postgres://`, in both modes.
#![cfg(feature = "postgres")]

mod common;

use common::check_run_and_status;
use lockward_testkit::PostgresServer;

#[test]
fn run_and_status_on_postgres() {
    let server = PostgresServer::start();
    check_run_and_status(&server.url(), "migrate/v42", |fence| {
        let stored = server.psql("SELECT fence FROM lockward_locks WHERE name = 'migrate/v42'");
        assert_eq!(stored, fence.to_string());
    });
    check_run_and_status(
        &format!("{}?mode=advisory", server.url()),
        "migrate/v43",
        |_| {},
    );
}
