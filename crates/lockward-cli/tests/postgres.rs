//! `lockward run` and `lockward status` on `postgres://`, in both modes.
#![cfg(feature = "postgres")]

mod common;

use std::process::Command;
use std::time::Duration;

use common::{lockward, wait_for_file};
use lockward_testkit::PostgresServer;

#[test]
fn run_and_status_on_postgres() {
    let server = PostgresServer::start();
    for url in [server.url(), format!("{}?mode=advisory", server.url())] {
        let dir = tempfile::tempdir().unwrap();
        let mut holder = Command::new(lockward())
            .args(["--store", &url, "run", "migrate/v42", "--ttl", "10s", "--"])
            .args([
                "sh",
                "-c",
                r#"echo "$LOCKWARD_FENCE" > "$1/fence"; sleep 3"#,
                "sh",
            ])
            .arg(dir.path())
            .spawn()
            .unwrap();
        let fence: u64 = wait_for_file(&dir.path().join("fence"), Duration::from_secs(10))
            .parse()
            .unwrap();
        let out = Command::new(lockward())
            .args(["--store", &url, "status", "migrate/", "--json"])
            .output()
            .unwrap();
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rows[0]["name"], "migrate/v42", "{url}");
        assert_eq!(rows[0]["fence"].as_u64(), Some(fence), "{url}");
        let busy = Command::new(lockward())
            .args([
                "--store",
                &url,
                "run",
                "migrate/v42",
                "--no-wait",
                "--",
                "true",
            ])
            .output()
            .unwrap();
        assert_eq!(busy.status.code(), Some(75), "{url}");
        holder.kill().unwrap();
        holder.wait().unwrap();
    }
}
