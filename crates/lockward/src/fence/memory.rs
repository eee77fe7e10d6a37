//! An in-process fenced register.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Fenced, FencedResource};
use crate::error::{Error, Result};

/// Fenced values in memory, for tests and single-process use.
#[derive(Debug, Default)]
pub struct MemoryRegister {
    values: Mutex<HashMap<String, Fenced>>,
}

impl MemoryRegister {
    /// An empty register.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl FencedResource for MemoryRegister {
    async fn write(&self, key: &str, value: &[u8], fence: u64) -> Result<()> {
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(current) = values.get(key).filter(|c| c.fence > fence) {
            return Err(Error::Stale {
                key: key.to_string(),
                fence,
                current: current.fence,
            });
        }
        values.insert(
            key.to_string(),
            Fenced {
                value: value.to_vec(),
                fence,
            },
        );
        Ok(())
    }

    async fn claim(&self, key: &str, fence: u64) -> Result<()> {
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        let entry = values.entry(key.to_string()).or_insert(Fenced {
            value: Vec::new(),
            fence: 0,
        });
        if entry.fence > fence {
            return Err(Error::Stale {
                key: key.to_string(),
                fence,
                current: entry.fence,
            });
        }
        entry.fence = fence;
        Ok(())
    }

    async fn read(&self, key: &str) -> Result<Option<Fenced>> {
        Ok(self
            .values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned())
    }
}
