//! Release notifications over Redis pub/sub.
//!
//! One RESP3 connection per store carries every subscription (opened at the
//! first wait); it re-subscribes by itself after a reconnect, and in a
//! cluster follows the slot map. Each channel is
//! subscribed while at least one local waiter wants it. Every message (and
//! every disconnection, since releases may have been missed meanwhile)
//! bumps a counter in a `watch` channel; each waiter holds a receiver, so a
//! message that arrives between its re-check and its next wait is never
//! lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{watch, OnceCell};

use super::conn::Conn;
use crate::backend::Wakeup;
use crate::url::RedisUrl;

/// Per channel: how many local waiters want it, and the counter that wakes them.
type WaiterMap = HashMap<Vec<u8>, (usize, watch::Sender<u64>)>;
type Waiters = Arc<Mutex<WaiterMap>>;

/// The pub/sub side of a Redis store.
pub struct Channels {
    url: RedisUrl,
    conn: OnceCell<Conn>,
    waiters: Waiters,
    /// Serialises SUBSCRIBE and UNSUBSCRIBE so they reach the server in the
    /// order their reference counts changed.
    ops: tokio::sync::Mutex<()>,
}

impl Channels {
    pub fn new(url: RedisUrl) -> Arc<Self> {
        Arc::new(Channels {
            url,
            conn: OnceCell::new(),
            waiters: Arc::default(),
            ops: tokio::sync::Mutex::new(()),
        })
    }

    async fn connection(&self) -> redis::RedisResult<Conn> {
        let waiters = self.waiters.clone();
        let push = move |push: PushInfo| {
            dispatch(&waiters, push);
            Ok::<(), std::convert::Infallible>(())
        };
        self.conn
            .get_or_try_init(|| Conn::connect(&self.url, Some(Box::new(push)), false))
            .await
            .cloned()
    }

    /// Subscribes to `channel`; the subscription is active on the server
    /// when this returns.
    pub async fn subscribe(self: &Arc<Self>, channel: &str) -> redis::RedisResult<ChannelWakeup> {
        let key = channel.as_bytes().to_vec();
        let _order = self.ops.lock().await;
        let (receiver, first) = {
            let mut waiters = lock(&self.waiters);
            let entry = waiters
                .entry(key.clone())
                .or_insert_with(|| (0, watch::channel(0).0));
            entry.0 += 1;
            (entry.1.subscribe(), entry.0 == 1)
        };
        let wakeup = ChannelWakeup {
            receiver,
            channel: key,
            channels: self.clone(),
        };
        if first {
            // On failure the wakeup's drop undoes the count.
            self.connection()
                .await?
                .subscribe(channel.as_bytes())
                .await?;
        }
        Ok(wakeup)
    }

    fn unsubscribe_later(self: &Arc<Self>, channel: Vec<u8>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let this = self.clone();
        runtime.spawn(async move {
            let _order = this.ops.lock().await;
            let idle = {
                let mut waiters = lock(&this.waiters);
                let idle = waiters.get(&channel).is_some_and(|(n, _)| *n == 0);
                if idle {
                    waiters.remove(&channel);
                }
                idle
            };
            if idle {
                if let Some(conn) = this.conn.get() {
                    let _ = conn.clone().unsubscribe(&channel).await;
                }
            }
        });
    }
}

fn lock(waiters: &Waiters) -> std::sync::MutexGuard<'_, WaiterMap> {
    waiters.lock().unwrap_or_else(|p| p.into_inner())
}

fn dispatch(waiters: &Waiters, push: PushInfo) {
    let waiters = lock(waiters);
    match push.kind {
        PushKind::Message => {
            if let Some(Value::BulkString(channel)) = push.data.first() {
                if let Some((_, tx)) = waiters.get(channel) {
                    tx.send_modify(|n| *n += 1);
                }
            }
        }
        PushKind::Disconnection => {
            for (_, tx) in waiters.values() {
                tx.send_modify(|n| *n += 1);
            }
        }
        _ => {}
    }
}

/// One waiter's view of a channel.
pub struct ChannelWakeup {
    receiver: watch::Receiver<u64>,
    channel: Vec<u8>,
    channels: Arc<Channels>,
}

#[async_trait]
impl Wakeup for ChannelWakeup {
    async fn changed(&mut self) {
        if self.receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    fn mark_seen(&mut self) {
        self.receiver.borrow_and_update();
    }
}

impl Drop for ChannelWakeup {
    fn drop(&mut self) {
        let now_idle = {
            let mut waiters = lock(&self.channels.waiters);
            match waiters.get_mut(&self.channel) {
                Some(entry) => {
                    entry.0 = entry.0.saturating_sub(1);
                    entry.0 == 0
                }
                None => false,
            }
        };
        if now_idle {
            self.channels
                .unsubscribe_later(std::mem::take(&mut self.channel));
        }
    }
}
