//! Redlock's line of waiters: a place on every master under one ticket,
//! turns published on every master, and leaving every line at once.

use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::join_all;

use super::mutex::{RedlockBackend, NODE_TIMEOUT};
use super::wakeup;
use crate::backend::redis::keys;
use crate::backend::{Attempt, InLine, Leave, Request, Subscription};
use crate::error::Result;
use crate::name::Name;
use crate::owner::OwnerId;

impl RedlockBackend {
    /// Subscribes to `channel` on every master that answers in time.
    /// Masters that are down now cannot publish either; renewing the place
    /// and the expiry re-check cover what they would have said.
    pub(super) async fn subscribe_everywhere(&self, channel: &str) -> Subscription {
        let subscribed = join_all(self.masters.iter().map(|m| async move {
            tokio::time::timeout(NODE_TIMEOUT, m.channels.subscribe(channel))
                .await
                .ok()
                .and_then(|r| r.ok())
        }))
        .await;
        let wakeups: Vec<_> = subscribed.into_iter().flatten().collect();
        Subscription::pushed(wakeup::AnyMaster(wakeups))
    }
}

#[async_trait]
impl InLine for RedlockBackend {
    async fn try_in_line(
        &self,
        req: &Request<'_>,
        place: Duration,
        ticket: u64,
    ) -> Result<Attempt> {
        let k = keys::keys(&self.prefix, req.name, false);
        self.try_acquire_keys(k, req, Some((place, ticket))).await
    }

    async fn subscribe_turn(&self, name: &Name, owner: OwnerId) -> Result<Subscription> {
        let k = keys::keys(&self.prefix, name, false);
        let channel = keys::turn_channel(&k, &owner.to_string());
        Ok(self.subscribe_everywhere(&channel).await)
    }

    fn leave_line(&self, name: &Name, owner: OwnerId) -> Leave {
        let k = keys::keys(&self.prefix, name, false);
        let conns: Vec<_> = self.masters.iter().map(|m| m.conn.clone()).collect();
        let leave = self.leave.clone();
        let owner = owner.to_string();
        Box::pin(async move {
            let calls = conns.into_iter().map(|mut conn| {
                let (leave, k, owner) = (&leave, &k, &owner);
                async move {
                    let mut call = leave.key(&k.lock);
                    call.key(&k.channel).key(&k.queue).key(&k.places).arg(owner);
                    // Best effort: a place left behind lapses with its lease.
                    let _ = tokio::time::timeout(NODE_TIMEOUT, call.invoke_async::<i64>(&mut conn))
                        .await;
                }
            });
            join_all(calls).await;
        })
    }
}
