//! Release notifications over Redis pub/sub.
//!
//! One RESP3 connection per store carries every subscription (opened at the
//! first wait); it re-subscribes by itself after a reconnect, and in a
//! cluster follows the slot map. Each channel is subscribed while at least
//! one local waiter wants it: a waiter in line listens on its own turn
//! channel, so a release reaches the next in line's connection only.
//! [`Waiters`] keeps the local waiters per channel and wakes everyone after a
//! disconnection, since messages may have been missed meanwhile.

use std::sync::Arc;

use async_trait::async_trait;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::OnceCell;

use super::conn::Conn;
use super::url::RedisUrl;
use crate::backend::channel_waiters::{Waiter, Waiters};
use crate::backend::Wakeup;

/// The pub/sub side of a Redis store.
pub struct Channels {
    url: RedisUrl,
    conn: OnceCell<Conn>,
    waiters: Waiters,
    /// Serialises SUBSCRIBE and UNSUBSCRIBE so they reach the server in the
    /// order their registrations changed.
    ops: tokio::sync::Mutex<()>,
}

impl Channels {
    pub fn new(url: RedisUrl) -> Arc<Self> {
        Arc::new(Channels {
            url,
            conn: OnceCell::new(),
            waiters: Waiters::default(),
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
    ///
    /// Cancellation: dropping the future leaves the channel subscribed until
    /// its last waiter is gone; no wakeup is lost.
    pub async fn subscribe(self: &Arc<Self>, channel: &str) -> redis::RedisResult<ChannelWakeup> {
        let _order = self.ops.lock().await;
        let (waiter, first) = self.waiters.register(channel.as_bytes(), None);
        let wakeup = ChannelWakeup {
            waiter: Some(waiter),
            channels: self.clone(),
        };
        if first {
            // On failure the wakeup's drop undoes the registration.
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
            if this.waiters.is_idle(&channel) {
                if let Some(conn) = this.conn.get() {
                    let _ = conn.clone().unsubscribe(&channel).await;
                }
            }
        });
    }
}

fn dispatch(waiters: &Waiters, push: PushInfo) {
    match push.kind {
        PushKind::Message => {
            if let [Value::BulkString(channel), payload, ..] = push.data.as_slice() {
                let next = match payload {
                    Value::BulkString(next) => next.as_slice(),
                    _ => b"",
                };
                waiters.notify(channel, next);
            }
        }
        PushKind::Disconnection => waiters.notify_everyone(),
        _ => {}
    }
}

/// One waiter's view of a channel.
pub struct ChannelWakeup {
    waiter: Option<Waiter>,
    channels: Arc<Channels>,
}

#[async_trait]
impl Wakeup for ChannelWakeup {
    async fn changed(&mut self) {
        match &mut self.waiter {
            Some(waiter) => waiter.changed().await,
            None => std::future::pending().await,
        }
    }

    fn mark_seen(&mut self) {
        if let Some(waiter) = &mut self.waiter {
            waiter.mark_seen();
        }
    }
}

impl Drop for ChannelWakeup {
    fn drop(&mut self) {
        let Some(waiter) = self.waiter.take() else {
            return;
        };
        let channel = waiter.topic().to_vec();
        drop(waiter);
        if self.channels.waiters.is_idle(&channel) {
            self.channels.unsubscribe_later(channel);
        }
    }
}
