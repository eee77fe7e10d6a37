//! A Prometheus server for tests: Debian's `prometheus` on a free loopback
//! port, scraping the given targets every 500 ms, with its query API read
//! over plain HTTP.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{free_port, require_binary, ServerProcess};

/// A running Prometheus, killed when dropped.
pub struct PrometheusServer {
    _dir: tempfile::TempDir,
    port: u16,
    _process: ServerProcess,
}

impl PrometheusServer {
    /// Starts Prometheus scraping `targets` (`host:port`, path `/metrics`)
    /// and waits until it is ready.
    pub fn start(targets: &[String]) -> PrometheusServer {
        let binary = require_binary("prometheus");
        let dir = crate::scratch::data_dir("prometheus");
        let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n  - job_name: lockward\n    static_configs:\n      - targets: [{}]\n",
            list.join(", ")
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).expect("write prometheus.yml");
        let port = free_port();
        let mut cmd = Command::new(binary);
        cmd.arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn");
        let log = dir.path().join("prometheus.log");
        let process = ServerProcess::spawn("prometheus", cmd, &log).expect("spawn prometheus");
        let server = PrometheusServer {
            _dir: dir,
            port,
            _process: process,
        };
        let until = Instant::now() + Duration::from_secs(30);
        while !server.get("/-/ready").is_some_and(|b| b.contains("Ready")) {
            assert!(Instant::now() < until, "prometheus never became ready");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// The result of an instant query, as the API's JSON text.
    pub fn query(&self, promql: &str) -> String {
        let mut encoded = String::new();
        for b in promql.bytes() {
            if b.is_ascii_alphanumeric() || b"_-.~".contains(&b) {
                encoded.push(b as char);
            } else {
                encoded.push_str(&format!("%{b:02X}"));
            }
        }
        self.get(&format!("/api/v1/query?query={encoded}"))
            .unwrap_or_default()
    }

    /// The body of `GET path`, if the server answered.
    fn get(&self, path: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        text.split_once("\r\n\r\n")
            .map(|(_, body)| body.to_string())
    }
}
