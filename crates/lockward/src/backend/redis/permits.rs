//! Semaphores kept by Redis: a sorted set of holders by lease expiry, a
//! hash of what each took, and the count of taken permits, changed
//! together by one script per step, so a permit costs the same however
//! many hold one.
//!
//! For a semaphore `N` (keys beside its lock key `L`, see [`keys`](super::keys)):
//!
//! | key | holds |
//! | --- | --- |
//! | `L:sem:holders` | holders' owner ids by lease expiry, server ms (a sorted set) |
//! | `L:sem:permits` | each holder's `PERMITS FENCE` (a hash) |
//! | `L:sem:taken` | permits taken by the holders listed, while any are |
//! | `L:sem:fence` | the last fencing token the semaphore issued; never expires |
//!
//! A holder whose lease ran out stays listed, its permits counted, until a
//! script meets it: every take drops up to 16 of them (so they never pile
//! up), and a take that would be refused first drops them all; each one is
//! dropped once, so the cost is spread over the takes.

use std::time::Duration;

use async_trait::async_trait;
use redis::Value;

use super::codec::{int, text};
use super::core::RedisBackend;
use crate::backend::time::ttl_millis;
use crate::backend::{no_permits, permit_row, PermitBackend, Request};
use crate::error::Result;
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

/// What follows a semaphore's key (after the name) on its holders' key.
const HOLDERS_SUFFIX: &str = ":sem:holders";

/// The keys of semaphore `name`.
struct SemKeys {
    holders: String,
    permits: String,
    taken: String,
    fence: String,
}

impl RedisBackend {
    fn sem_keys(&self, name: &Name) -> SemKeys {
        let lock = self.keys(name).lock;
        SemKeys {
            holders: format!("{lock}{HOLDERS_SUFFIX}"),
            permits: format!("{lock}:sem:permits"),
            taken: format!("{lock}:sem:taken"),
            fence: format!("{lock}:sem:fence"),
        }
    }
}

#[async_trait]
impl PermitBackend for RedisBackend {
    async fn take_permits(&self, req: &Request<'_>, of: u32, take: u32) -> Result<u64> {
        let keys = self.sem_keys(req.name);
        let (reply, _): (Vec<Value>, _) = self
            .invoke(
                self.permit_scripts
                    .take
                    .key(&keys.holders)
                    .key(&keys.permits)
                    .key(&keys.taken)
                    .key(&keys.fence)
                    .arg(req.owner.to_string())
                    .arg(of)
                    .arg(take)
                    .arg(ttl_millis(req.ttl)),
            )
            .await?;
        let number = |i: usize| reply.get(i).and_then(int);
        match (number(0), number(1)) {
            (Some(1), Some(fence)) if fence > 0 => {
                let what = format!("the permits of {:?}", req.name.as_str());
                if let Err(e) = self.confirm_replicated(&what).await {
                    // Given back, so nobody holds what the caller lacks.
                    let _ = self.release_permits(req.name, req.owner).await;
                    return Err(e);
                }
                Ok(fence as u64)
            }
            (Some(0), Some(free)) => Err(no_permits(
                req.name.as_str(),
                take,
                u64::try_from(free).unwrap_or(0),
                of,
            )),
            (Some(-3), _) => Err(self.protocol(format!(
                "the fence counter {} is not a number; it was left untouched",
                keys.fence
            ))),
            _ => Err(self.protocol(format!(
                "the keys of semaphore {:?} ({}…) hold values that lockward did not write; \
                 they were left untouched",
                req.name.as_str(),
                keys.holders
            ))),
        }
    }

    async fn extend_permits(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let keys = self.sem_keys(name);
        let (done, _): (i64, _) = self
            .invoke(
                self.permit_scripts
                    .extend
                    .key(&keys.holders)
                    .key(&keys.permits)
                    .key(&keys.taken)
                    .arg(owner.to_string())
                    .arg(ttl_millis(ttl)),
            )
            .await?;
        crate::backend::owner_checked(name, u64::try_from(done).unwrap_or(0))?;
        self.confirm_replicated(&format!(
            "the renewal of the permits of {:?}",
            name.as_str()
        ))
        .await
    }

    async fn release_permits(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let keys = self.sem_keys(name);
        let (done, retried): (i64, _) = self
            .invoke(
                self.permit_scripts
                    .release
                    .key(&keys.holders)
                    .key(&keys.permits)
                    .key(&keys.taken)
                    .arg(owner.to_string()),
            )
            .await?;
        // A retry after a dropped connection may find its permits given
        // back by the first attempt.
        if retried && done == 0 {
            return Ok(());
        }
        crate::backend::owner_checked(name, u64::try_from(done).unwrap_or(0))
    }

    async fn permits_held(&self, name: &Name) -> Result<u64> {
        let keys = self.sem_keys(name);
        let (held, _): (i64, _) = self
            .invoke(
                self.permit_scripts
                    .held
                    .key(&keys.holders)
                    .key(&keys.permits)
                    .key(&keys.taken),
            )
            .await?;
        Ok(u64::try_from(held).unwrap_or(0))
    }

    async fn list_permits(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let names = self.names_with(prefix, HOLDERS_SUFFIX).await?;
        let mut rows = Vec::new();
        for name in names {
            let keys = self.sem_keys(&name);
            let (reply, _): (Vec<Value>, _) = self
                .invoke(
                    self.permit_scripts
                        .list
                        .key(&keys.holders)
                        .key(&keys.permits)
                        .key(&keys.taken),
                )
                .await?;
            for holder in reply.chunks_exact(3) {
                let owner = text(&holder[0]).unwrap_or_default();
                let fence = text(&holder[2])
                    .and_then(|v| v.rsplit_once(' ').and_then(|(_, f)| f.parse().ok()));
                let expires_in = int(&holder[1])
                    .and_then(|ms| u64::try_from(ms).ok())
                    .map(Duration::from_millis);
                rows.push(LockInfo {
                    expires_in,
                    ..permit_row(name.as_str(), &owner, owner.clone(), fence)
                });
            }
        }
        Ok(rows)
    }
}
