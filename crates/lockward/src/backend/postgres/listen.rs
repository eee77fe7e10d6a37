//! Notifications over LISTEN/NOTIFY: one listening connection per store,
//! opened at the first watch, listening on the channels its watchers want
//! (a table's, whose payload is the released name: leader observers watch
//! it, and so does the first waiter behind a holder that took its lock
//! while nobody waited). When the connection drops, every watcher is woken
//! to re-check, and the next watch reopens it.

use std::sync::Arc;

use tokio_postgres::{AsyncMessage, Client};

use super::core;
use super::url::PostgresUrl;
use crate::backend::channel_waiters::{Waiter, Waiters};
use crate::error::Result;

/// The listening side of a store.
pub struct Listener {
    url: PostgresUrl,
    address: String,
    waiters: Waiters,
    /// The connection, and the channels it listens on.
    client: tokio::sync::Mutex<Option<(Client, Vec<String>)>>,
}

impl Listener {
    pub fn new(url: PostgresUrl, address: String) -> Arc<Self> {
        Arc::new(Listener {
            url,
            address,
            waiters: Waiters::default(),
            client: tokio::sync::Mutex::new(None),
        })
    }

    /// A wakeup for notifications on `channel` (an SQL identifier lockward
    /// made), for every one or, with `payload`, for those that carry it;
    /// the LISTEN is active when this returns. Channels stay listened to
    /// while the connection lives; a waiter's own channel is dropped from
    /// the connection at the next wait once it has no waiter.
    ///
    /// Cancellation: dropping the future drops the waiter; the channel stays
    /// listened to for the store's other waiters.
    pub async fn listen(&self, channel: &str, payload: Option<&str>) -> Result<Waiter> {
        let (wakeup, _) = self
            .waiters
            .register(channel.as_bytes(), payload.map(str::as_bytes));
        let mut slot = self.client.lock().await;
        let open = match slot.take() {
            Some((client, listening)) if !client.is_closed() => (client, listening),
            _ => {
                let (on_message, on_close) = (self.waiters.clone(), self.waiters.clone());
                let client = core::open(
                    &self.url,
                    &self.address,
                    move |message| {
                        if let AsyncMessage::Notification(n) = message {
                            on_message.notify(n.channel().as_bytes(), n.payload().as_bytes());
                        }
                    },
                    move || on_close.notify_everyone(),
                )
                .await?;
                (client, Vec::new())
            }
        };
        let (client, listening) = slot.insert(open);
        // Forget channels nobody waits on any more, in the same round trip.
        let idle: Vec<String> = listening
            .iter()
            .filter(|c| self.waiters.is_idle(c.as_bytes()))
            .cloned()
            .collect();
        listening.retain(|c| !idle.contains(c));
        let mut sql = String::new();
        for c in &idle {
            sql.push_str(&format!("UNLISTEN {c};"));
        }
        if !listening.iter().any(|c| c == channel) {
            sql.push_str(&format!("LISTEN {channel};"));
            listening.push(channel.to_string());
        }
        if !sql.is_empty() {
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| core::pg_error(&self.address, &e))?;
        }
        Ok(wakeup)
    }
}
