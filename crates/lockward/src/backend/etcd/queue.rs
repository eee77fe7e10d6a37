//! The line of contenders on one etcd lock: entering it, a contender's
//! place (the key created just before its own), waiting for that
//! predecessor's delete with the contender's lease kept alive, and taking
//! the lock.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{
    Compare, CompareOp, EventType, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse, WatchOptions,
};

use super::core::{contender_value, Contender, EtcdBackend, Place, Wait, WATCH_SAFETY_NET};
use super::keys;
use crate::backend::{Grant, Kind, Request};
use crate::error::Result;

/// A contender that joined a line: its key, and the oldest keys of the
/// name's writers and readers as the same transaction saw them.
pub(super) struct Entered<'a> {
    pub(super) contender: Contender<'a>,
    /// The create revision of the writers' oldest key (the holder, when a
    /// writer holds).
    pub(super) first_writer: Option<i64>,
    /// The create revision of the readers' oldest key.
    pub(super) first_reader: Option<i64>,
}

impl Entered<'_> {
    /// Whether a reader came before this contender (a writer waits for it
    /// once first in line; no reader can come before it later).
    pub(super) fn readers_before(&self) -> bool {
        self.first_reader
            .is_some_and(|r| r < self.contender.revision)
    }

    /// Whether the contender holds at once: a reader when no writer came
    /// before it, a writer when first in line with no reader before it.
    pub(super) fn holds(&self, kind: Kind) -> bool {
        let own = self.contender.revision;
        match kind {
            Kind::Reader => self.first_writer.is_none_or(|w| w >= own),
            _ => self.first_writer == Some(own) && !self.readers_before(),
        }
    }
}

impl EtcdBackend {
    /// The contender holds: its lease is kept as the holder's. The lease
    /// aged while it waited: the local deadline counts from its last
    /// acknowledged refresh, which the keep-alive kept within TTL/3.
    pub(super) fn take(&self, req: &Request<'_>, contender: Contender<'_>) -> Grant {
        let granted_at = *contender
            .refreshed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let fence = contender.revision as u64;
        let held = contender.keep(req.ttl);
        self.leases().insert((req.name.clone(), req.owner), held);
        Grant {
            fence,
            started: granted_at,
        }
    }

    /// Grants a lease and puts our contender key if absent (a reader's
    /// beside the line, see `readers.rs`); returns it with the oldest keys
    /// of the writers and the readers, read in the same transaction.
    pub(super) async fn enter(&self, req: &Request<'_>) -> Result<Entered<'_>> {
        let prefix = keys::lock_prefix(&self.prefix, req.name);
        let readers = keys::readers_prefix(&self.prefix, req.name);
        let reading = req.kind == Kind::Reader;
        let granted_from = Instant::now();
        let lease = self.grant(req.ttl).await?;
        let key = keys::contender_key(if reading { &readers } else { &prefix }, lease);
        let mut contender = Contender {
            backend: self,
            lease,
            key: key.clone(),
            revision: 0,
            refreshed: Arc::new(Mutex::new(granted_from)),
            keepalive: None,
        };
        // A reader stores its owner id, whatever its label: it is no
        // election proposal.
        let value = if reading {
            req.owner.to_string()
        } else {
            contender_value(req)
        };
        let first = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1)
            .with_keys_only();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(
                    key.clone(),
                    value,
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::get(prefix.clone(), Some(first.clone())),
                TxnOp::get(readers.clone(), Some(first.clone())),
            ])
            .or_else([
                TxnOp::get(key.clone(), None),
                TxnOp::get(prefix.clone(), Some(first.clone())),
                TxnOp::get(readers.clone(), Some(first)),
            ]);
        let resp = self
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        let responses = resp.op_responses();
        let first_of = |i: usize| match responses.get(i) {
            Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| kv.create_revision()),
            _ => None,
        };
        contender.revision = if resp.succeeded() {
            resp.header().map(|h| h.revision()).unwrap_or(0)
        } else {
            first_of(0).unwrap_or(0)
        };
        if contender.revision <= 0 {
            return Err(self.protocol("the contender key was not created"));
        }
        Ok(Entered {
            first_writer: first_of(1),
            first_reader: first_of(2),
            contender,
        })
    }

    /// Keeps the contender's lease alive every `every` until aborted,
    /// recording each acknowledged refresh.
    pub(super) fn keep_alive_while_waiting(
        &self,
        contender: &Contender<'_>,
        every: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let mut client = self.client();
        let lease = contender.lease;
        let refreshed = contender.refreshed.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let sent = Instant::now();
                if let Ok((mut keeper, mut stream)) = client.lease_keep_alive(lease).await {
                    let _ = keeper.keep_alive().await;
                    if let Ok(Some(r)) = stream.message().await {
                        if r.ttl() > 0 {
                            *refreshed.lock().unwrap_or_else(|p| p.into_inner()) = sent;
                        }
                    }
                }
            }
        })
    }

    /// Waits until the key created just before ours is deleted (or a second
    /// passed, as a safety net), or the deadline passes.
    pub(super) async fn wait_for_predecessor(
        &self,
        prefix: &str,
        revision: i64,
        deadline: Option<Instant>,
    ) -> Result<Wait> {
        let before = GetOptions::new()
            .with_prefix()
            .with_max_create_revision(revision - 1)
            .with_sort(SortTarget::Create, SortOrder::Descend)
            .with_limit(1);
        let resp = self
            .call(|mut c| {
                let (key, opts) = (prefix.to_string(), before.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let Some(predecessor) = resp.kvs().first() else {
            return Ok(Wait::NoneBefore);
        };
        let pred_key = predecessor.key().to_vec();
        let pred_revision = predecessor.create_revision();
        // Watch from just after our read, so a delete in between is seen.
        let from = resp.header().map(|h| h.revision() + 1).unwrap_or(0);
        let mut client = self.client();
        let watch = async {
            let mut stream = client
                .watch(
                    pred_key,
                    Some(WatchOptions::new().with_start_revision(from)),
                )
                .await?;
            while let Some(msg) = stream.message().await? {
                if msg.canceled() {
                    return Ok(false);
                }
                if msg
                    .events()
                    .iter()
                    .any(|e| e.event_type() == EventType::Delete)
                {
                    return Ok(true);
                }
            }
            Ok::<bool, etcd_client::Error>(false)
        };
        let net = Instant::now() + WATCH_SAFETY_NET;
        let wake = deadline.map_or(net, |d| d.min(net));
        match tokio::time::timeout_at(wake.into(), watch).await {
            Ok(Ok(true)) => Ok(Wait::Deleted(pred_revision)),
            Ok(Ok(false)) => Ok(Wait::Recheck),
            // A broken watch (restart, failover) just means: look again.
            Ok(Err(e)) => {
                tracing::debug!(address = %self.address, error = %e, "watch ended; re-checking");
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(Wait::Recheck)
            }
            Err(_) if deadline.is_some_and(|d| Instant::now() >= d) => Ok(Wait::TimedOut),
            Err(_) => Ok(Wait::Recheck),
        }
    }

    /// Where the key of create revision `revision` stands in its line, and
    /// the first key's create revision.
    pub(super) async fn place(&self, prefix: &str, revision: i64) -> Result<(Place, i64)> {
        let first = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1);
        let resp = self
            .call(|mut c| {
                let (key, opts) = (prefix.to_string(), first.clone());
                async move { c.get(key, Some(opts)).await }
            })
            .await?;
        let first = resp.kvs().first().map(|kv| kv.create_revision());
        Ok(match first {
            Some(first) if first == revision => (Place::First, first),
            Some(first) if first < revision => (Place::Behind, first),
            // Nothing before us, yet not us: our key (and lease) is gone.
            _ => (Place::Gone, 0),
        })
    }

    /// Revokes `lease` (its keys go with it); `false` when it was gone.
    pub(super) async fn revoke(&self, lease: i64) -> Result<bool> {
        self.call(|mut c| async move {
            match c.lease_revoke(lease).await {
                Ok(_) => Ok(true),
                Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound => {
                    Ok(false)
                }
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// One keep-alive; `false` when the lease is gone.
    pub(super) async fn keep_alive_once(&self, lease: i64) -> Result<bool> {
        // Revoked (a forced unlock, `etcdctl lease revoke`) or expired on
        // the server: gone, not a transient failure to retry until the
        // local deadline.
        let gone = |e: &etcd_client::Error| matches!(e, etcd_client::Error::LeaseKeepAliveError(why) if why.contains("not found"));
        self.call(|mut c| async move {
            let (mut keeper, mut stream) = match c.lease_keep_alive(lease).await {
                Ok(opened) => opened,
                Err(e) if gone(&e) => return Ok(false),
                Err(e) => return Err(e),
            };
            keeper.keep_alive().await?;
            Ok(stream
                .message()
                .await?
                .map(|r| r.ttl() > 0)
                .unwrap_or(false))
        })
        .await
    }
}
