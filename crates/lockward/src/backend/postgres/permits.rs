//! Semaphores kept by PostgreSQL (lease mode): a row per holder, and the
//! count of taken permits split over up to 16 shard rows, each with a
//! quota, changed in the same transaction, so a permit costs the same
//! however many hold one, and takes do not queue on one row.
//!
//! For lock table `T`:
//!
//! | table | holds |
//! | --- | --- |
//! | `T_permit_shards` | per semaphore and shard: `taken`, the permits its holders took, and its `quota` |
//! | `T_permits` | per holder: name, owner, holder label, shard, permits, fence (from `T_fence`), expiry |
//!
//! A holder belongs to one shard (by its owner id). Every shard keeps
//! `taken <= quota`, and the quotas add up to the permits, so the shards
//! together never hold more. A take that fits its shard's quota updates
//! that shard's row alone: on a durable server each commit waits for its
//! flush, and a single count row would make every take wait for the one
//! before it. A take that does not fit locks every shard (in order),
//! drops lapsed holders, judges by the total, and shares the free permits
//! out again as quotas. Taking runs as a function (`T_take_permits`) and
//! giving back as one statement, each one round trip, and each writes its
//! holder's row before the count. Nobody waits for another's holder row (a
//! dropping take skips rows a release is deleting), so no two wait on each
//! other in a cycle. A holder whose lease ran out stays listed until a take
//! that runs short drops it (through the index on name and expiry, so the
//! cost is its own, once).

use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::types::ToSql;

use super::lease::PostgresLeaseBackend;
use crate::backend::time::{from_millis, millis};
use crate::backend::{no_permits, owner_checked, permit_row, PermitBackend, Request};
use crate::error::Result;
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

#[async_trait]
impl PermitBackend for PostgresLeaseBackend {
    async fn take_permits(&self, req: &Request<'_>, of: u32, take: u32) -> Result<u64> {
        let owner = req.owner.to_string();
        let params: [&(dyn ToSql + Sync); 6] = [
            &req.name.as_str(),
            &owner,
            &req.label,
            &i64::from(of),
            &i64::from(take),
            &millis(req.ttl),
        ];
        let rows = self.run(&self.permit_sql.take, &params).await?;
        let outcome: i64 = rows.first().map_or(-1, |r| r.get(0));
        match u64::try_from(outcome) {
            Ok(fence) => Ok(fence),
            Err(_) => {
                let free = u64::try_from(-1 - outcome).unwrap_or(0);
                Err(no_permits(req.name.as_str(), take, free, of))
            }
        }
    }

    async fn extend_permits(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let rows = self
            .run(
                &self.permit_sql.extend,
                &[&name.as_str(), &owner.to_string(), &millis(ttl)],
            )
            .await?;
        owner_checked(name, rows.len() as u64)
    }

    async fn release_permits(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let rows = self
            .run(
                &self.permit_sql.release,
                &[&name.as_str(), &owner.to_string()],
            )
            .await?;
        let released: i32 = rows.first().map_or(0, |r| r.get(0));
        owner_checked(name, u64::try_from(released).unwrap_or(0))
    }

    async fn permits_held(&self, name: &Name) -> Result<u64> {
        let rows = self.run(&self.permit_sql.held, &[&name.as_str()]).await?;
        let held: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(u64::try_from(held).unwrap_or(0))
    }

    async fn list_permits(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let rows = self.run(&self.permit_sql.list, &[&prefix]).await?;
        Ok(rows
            .iter()
            .map(|row| {
                let (name, owner): (String, String) = (row.get(0), row.get(1));
                let fence = u64::try_from(row.get::<_, i64>(3)).ok();
                LockInfo {
                    label: row.get(2),
                    expires_in: Some(from_millis(row.get(4))),
                    ..permit_row(&name, &owner, owner.clone(), fence)
                }
            })
            .collect())
    }
}
