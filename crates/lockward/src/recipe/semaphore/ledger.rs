//! The semaphore kept in a ledger, on stores that do not keep semaphores
//! themselves: a lock per holder on a slot, `NAME#permit/SLOT`, and one
//! versioned record, `NAME#permits`, listing `SLOT PERMITS` per holder,
//! written by compare-and-set (see the [module docs](super)).

use std::time::Duration;

use super::{Admission, Permit, PermitGauge, Semaphore};
use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::options::LockOptions;

/// The most holders at once on a store that keeps the semaphore in a
/// ledger, which lists each one (no limit where the store keeps it
/// natively).
pub const MAX_HOLDERS: u32 = 4_096;

/// How long the ledger is kept after its last change.
const LEDGER_KEEP: Duration = Duration::from_secs(30 * 24 * 3600);

/// How often a write of the ledger may meet a conflicting one before the
/// caller is told the semaphore is contended.
const WRITE_TRIES: u32 = 1_000;

/// One line of the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    slot: u32,
    permits: u32,
}

/// The ledger as read: its entries and the version to write against.
struct Ledger {
    entries: Vec<Entry>,
    version: u64,
}

impl Semaphore {
    /// The permits of the holders whose slot is held: one read of the
    /// ledger and one look at each holder's slot.
    pub(super) async fn held_in_ledger(&self) -> Result<u32> {
        let ledger = self.read().await?;
        let mut held = 0u64;
        for entry in ledger.entries {
            if self
                .store
                .inspect(self.slot_name(entry.slot))
                .await?
                .is_some()
            {
                held += u64::from(entry.permits);
            }
        }
        Ok(u32::try_from(held).unwrap_or(u32::MAX))
    }

    /// Drops slot `slot` from the ledger unless its lock is held again.
    pub(super) async fn forget_in_ledger(&self, slot: u32) -> Result<()> {
        for _ in 0..WRITE_TRIES {
            let ledger = self.read().await?;
            if !ledger.entries.iter().any(|e| e.slot == slot) {
                return Ok(());
            }
            if self.store.inspect(self.slot_name(slot)).await?.is_some() {
                // A new holder took the slot (and wrote its own entry).
                return Ok(());
            }
            let kept: Vec<Entry> = ledger
                .entries
                .into_iter()
                .filter(|e| e.slot != slot)
                .collect();
            if self.write(&kept, ledger.version).await? {
                return Ok(());
            }
            tokio::task::yield_now().await;
        }
        Err(self.contended())
    }

    /// One admission through the ledger.
    pub(super) async fn admit_in_ledger(&self, k: u32, opts: &LockOptions) -> Result<Admission> {
        // The slot we hold, once taken; kept across ledger conflicts.
        let mut taken: Option<(u32, Guard)> = None;
        for _ in 0..WRITE_TRIES {
            let ledger = self.read().await?;
            let mut entries = ledger.entries;
            if let Some((slot, _)) = &taken {
                // We hold its lock, so any entry listing it is a gone holder's.
                entries.retain(|e| e.slot != *slot);
            }
            if self.refusal(&entries, k).is_some() {
                entries = self.live(entries).await?;
                if let Some(why) = self.refusal(&entries, k) {
                    if let Some((_, guard)) = taken {
                        let _ = guard.release().await;
                    }
                    return Ok(Admission::Refused(why));
                }
            }
            let (slot, guard) = match taken.take() {
                Some(held) => held,
                None => {
                    let slot = lowest_free_slot(&entries);
                    match self.store.try_acquire(self.slot_name(slot), opts).await {
                        Ok(guard) => (slot, guard),
                        // Another holder took it since we read: read again.
                        Err(Error::Busy { .. }) => continue,
                        Err(e) => return Err(e),
                    }
                }
            };
            entries.push(Entry { slot, permits: k });
            if self.write(&entries, ledger.version).await? {
                tracing::Span::current().record("slot", slot);
                return Ok(Admission::Granted(Box::new(Permit {
                    guard,
                    slot: Some(slot),
                    permits: k,
                    semaphore: self.clone(),
                    _counted: PermitGauge::start(&self.name, k),
                })));
            }
            taken = Some((slot, guard));
            tokio::task::yield_now().await;
        }
        if let Some((_, guard)) = taken {
            let _ = guard.release().await;
        }
        Err(self.contended())
    }

    /// Why `k` more permits do not fit beside `entries`; `None` when they do.
    fn refusal(&self, entries: &[Entry], k: u32) -> Option<String> {
        let used: u64 = entries.iter().map(|e| u64::from(e.permits)).sum();
        let free = u64::from(self.permits).saturating_sub(used);
        if u64::from(k) > free {
            return Some(crate::backend::wanted(k, free, self.permits));
        }
        if entries.len() >= MAX_HOLDERS as usize {
            return Some(format!(
                "it has {MAX_HOLDERS} holders, the most one semaphore lists at once \
                 ({free} of {} permits free); take several permits per holder",
                self.permits
            ));
        }
        None
    }

    /// The entries whose slot lock is held.
    async fn live(&self, entries: Vec<Entry>) -> Result<Vec<Entry>> {
        let mut live = Vec::with_capacity(entries.len());
        for entry in entries {
            if self
                .store
                .inspect(self.slot_name(entry.slot))
                .await?
                .is_some()
            {
                live.push(entry);
            }
        }
        Ok(live)
    }

    async fn read(&self) -> Result<Ledger> {
        let Some(record) = self.store.read_versioned(&self.ledger_name()).await? else {
            return Ok(Ledger {
                entries: Vec::new(),
                version: 0,
            });
        };
        let entries = parse(&record.value).ok_or_else(|| Error::Protocol {
            address: self.store.address(),
            message: format!(
                "the ledger {} holds a value that lockward did not write; it was left untouched",
                self.ledger_name()
            ),
            cause: None,
        })?;
        Ok(Ledger {
            entries,
            version: record.version,
        })
    }

    /// Writes `entries` if the ledger is still at `version`.
    async fn write(&self, entries: &[Entry], version: u64) -> Result<bool> {
        let value = render(entries);
        Ok(self
            .store
            .write_versioned(&self.ledger_name(), version, &value, LEDGER_KEEP)
            .await?
            .is_some())
    }

    fn contended(&self) -> Error {
        Error::Contended {
            key: self.ledger_name(),
            tries: WRITE_TRIES,
        }
    }
}

/// The lowest slot number no entry lists.
fn lowest_free_slot(entries: &[Entry]) -> u32 {
    let mut used: Vec<u32> = entries.iter().map(|e| e.slot).collect();
    used.sort_unstable();
    let mut slot = 0;
    for u in used {
        if u == slot {
            slot += 1;
        } else if u > slot {
            break;
        }
    }
    slot
}

fn parse(value: &str) -> Option<Vec<Entry>> {
    value
        .lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (slot, permits) = line.split_once(' ')?;
            Some(Entry {
                slot: slot.parse().ok().filter(|s| *s < MAX_HOLDERS)?,
                permits: permits.parse().ok().filter(|p| *p > 0)?,
            })
        })
        .collect()
}

fn render(entries: &[Entry]) -> String {
    let mut out = String::with_capacity(entries.len() * 12);
    for e in entries {
        out.push_str(&format!("{} {}\n", e.slot, e.permits));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn holders(n: u32, each: u32) -> Vec<Entry> {
        (0..n)
            .map(|slot| Entry {
                slot,
                permits: each,
            })
            .collect()
    }

    #[test]
    fn a_refusal_says_what_is_free() {
        let sem = Semaphore::new(Store::memory(), "pool", 1_000_000).unwrap();
        assert_eq!(sem.refusal(&holders(10, 1), 5), None);
        assert_eq!(
            sem.refusal(&holders(2, 500_000), 1).as_deref(),
            Some("1 wanted, 0 of 1000000 free")
        );
        // Permits to spare, but no room to list one more holder.
        let full = sem.refusal(&holders(MAX_HOLDERS, 1), 1).unwrap();
        assert!(full.contains("4096 holders"), "{full}");
        assert!(full.contains("995904 of 1000000 permits free"), "{full}");
    }

    #[test]
    fn the_ledger_round_trips_and_refuses_foreign_text() {
        let entries = vec![
            Entry {
                slot: 0,
                permits: 60_000,
            },
            Entry {
                slot: 3,
                permits: 1,
            },
        ];
        assert_eq!(parse(&render(&entries)), Some(entries.clone()));
        assert_eq!(parse(""), Some(vec![]));
        assert_eq!(parse("banana"), None);
        assert_eq!(parse("1 0\n"), None);
        assert_eq!(parse("99999 1\n"), None);
        assert_eq!(lowest_free_slot(&entries), 1);
        assert_eq!(lowest_free_slot(&[]), 0);
    }
}
