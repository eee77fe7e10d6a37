//! Helpers shared by the CLI tests.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

/// The `lockward` binary under test.
pub fn lockward() -> &'static str {
    env!("CARGO_BIN_EXE_lockward")
}

/// Waits until `path` exists and returns its trimmed contents.
pub fn wait_for_file(path: &Path, within: Duration) -> String {
    let until = Instant::now() + within;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if !text.trim().is_empty() {
                return text.trim().to_string();
            }
        }
        assert!(Instant::now() < until, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` still exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until process `pid` is gone; false if it outlived `within`.
pub fn wait_gone(pid: u32, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}
