//! The registers the workloads write: the real fenced one (SQLite, via
//! lockward's `fence` module) and a plain file that ignores fences, used as
//! the positive control and as the mutant.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use lockward::fence::{Fenced, FencedResource};

/// A register in a file, `VALUE FENCE`, that accepts every write: no
/// fence check, no atomicity. Without a lock it loses updates; with a lock
/// and no fences, a paused holder's late write wins.
pub struct PlainRegister {
    dir: PathBuf,
}

impl PlainRegister {
    /// A register whose keys are files in `dir`.
    pub fn new(dir: &Path) -> PlainRegister {
        PlainRegister {
            dir: dir.to_path_buf(),
        }
    }
}

#[async_trait]
impl FencedResource for PlainRegister {
    async fn write(&self, key: &str, value: &[u8], fence: u64) -> lockward::Result<()> {
        let mut text = value.to_vec();
        text.extend_from_slice(format!(" {fence}").as_bytes());
        std::fs::write(self.dir.join(format!("plain-{key}")), text).map_err(|e| {
            lockward::Error::Protocol {
                address: self.dir.display().to_string(),
                message: e.to_string(),
                cause: None,
            }
        })
    }

    /// Claims nothing: this register ignores fences.
    async fn claim(&self, _key: &str, _fence: u64) -> lockward::Result<()> {
        Ok(())
    }

    async fn read(&self, key: &str) -> lockward::Result<Option<Fenced>> {
        let Ok(text) = std::fs::read_to_string(self.dir.join(format!("plain-{key}"))) else {
            return Ok(None);
        };
        let (value, fence) = text.rsplit_once(' ').unwrap_or((text.as_str(), "0"));
        Ok(Some(Fenced {
            value: value.as_bytes().to_vec(),
            fence: fence.trim().parse().unwrap_or(0),
        }))
    }
}
