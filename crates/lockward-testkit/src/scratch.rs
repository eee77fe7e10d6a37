//! The servers' data folders: one per server under a common root, named
//! after the process that owns it, and swept once that process is gone.
//!
//! A server kept in a `static` is never dropped, so its `TempDir` never
//! removes its folder; a test binary killed mid-run leaves its folders too.
//! Left alone, every run of the suite would leave gigabytes of database
//! files behind. The servers themselves die with their test process (see
//! `process`), so a folder whose owner is gone is nobody's.

use std::path::PathBuf;

/// Where the data folders live.
fn root() -> PathBuf {
    std::env::temp_dir().join("lockward-testkit")
}

/// A new, empty data folder for one server (or a test's own file kept in
/// a `static`), removed when dropped and in any case by the first server
/// started after this process is gone.
pub fn data_dir(what: &str) -> tempfile::TempDir {
    let root = root();
    std::fs::create_dir_all(&root)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", root.display()));
    sweep(&root);
    tempfile::Builder::new()
        .prefix(&format!("{}-{what}-", std::process::id()))
        .tempdir_in(&root)
        .unwrap_or_else(|e| panic!("temp dir for {what} in {}: {e}", root.display()))
}

/// Removes the folders whose owning process no longer runs. Another
/// process sweeping at the same moment may remove one first: fine.
fn sweep(root: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if owner.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_owners_folder_is_swept_and_a_live_ones_kept() {
        let mine = data_dir("sweep-test");
        // A process that ran and ended: its pid no longer runs.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let orphan = root().join(format!("{dead}-sweep-test-x"));
        std::fs::create_dir_all(orphan.join("data")).unwrap();
        std::fs::write(orphan.join("data/file"), b"left behind").unwrap();
        let next = data_dir("sweep-test");
        assert!(!orphan.exists(), "{} was not swept", orphan.display());
        assert!(mine.path().is_dir() && next.path().is_dir());
        let path = next.path().to_path_buf();
        drop(next);
        assert!(!path.exists());
    }
}
