//! Release notifications over LISTEN/NOTIFY: one listening connection per
//! store, opened at the first wait; each notification carries the released
//! name and bumps that name's counter, which its waiters watch. When the
//! connection drops, every waiter is woken to re-check, and the next wait
//! reopens it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::watch;
use tokio_postgres::{AsyncMessage, Client};

use super::conn;
use crate::backend::Wakeup;
use crate::error::Result;
use crate::url::PostgresUrl;

type Counters = Arc<Mutex<HashMap<String, watch::Sender<u64>>>>;

/// The listening side of a store.
pub struct Listener {
    url: PostgresUrl,
    address: String,
    channel: String,
    counters: Counters,
    client: tokio::sync::Mutex<Option<Client>>,
}

impl Listener {
    pub fn new(url: PostgresUrl, address: String, channel: String) -> Arc<Self> {
        Arc::new(Listener {
            url,
            address,
            channel,
            counters: Arc::default(),
            client: tokio::sync::Mutex::new(None),
        })
    }

    /// A wakeup for `name`; the LISTEN is active when this returns.
    pub async fn subscribe(&self, name: &str) -> Result<NameWakeup> {
        let receiver = {
            let mut counters = lock(&self.counters);
            if counters.len() > 1024 {
                counters.retain(|_, tx| tx.receiver_count() > 0);
            }
            counters
                .entry(name.to_string())
                .or_insert_with(|| watch::channel(0).0)
                .subscribe()
        };
        let mut slot = self.client.lock().await;
        if slot.as_ref().is_none_or(Client::is_closed) {
            let (on_message, on_close) = (self.counters.clone(), self.counters.clone());
            let client = conn::open(
                &self.url,
                &self.address,
                move |message| {
                    if let AsyncMessage::Notification(n) = message {
                        if let Some(tx) = lock(&on_message).get(n.payload()) {
                            tx.send_modify(|c| *c += 1);
                        }
                    }
                },
                move || {
                    for tx in lock(&on_close).values() {
                        tx.send_modify(|c| *c += 1);
                    }
                },
            )
            .await?;
            client
                .batch_execute(&format!("LISTEN {}", self.channel))
                .await
                .map_err(|e| conn::pg_error(&self.address, &e))?;
            *slot = Some(client);
        }
        Ok(NameWakeup { receiver })
    }
}

fn lock(counters: &Counters) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
    counters.lock().unwrap_or_else(|p| p.into_inner())
}

/// One waiter's view of its name's notifications.
pub struct NameWakeup {
    receiver: watch::Receiver<u64>,
}

#[async_trait]
impl Wakeup for NameWakeup {
    async fn changed(&mut self) {
        if self.receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    fn mark_seen(&mut self) {
        self.receiver.borrow_and_update();
    }
}
