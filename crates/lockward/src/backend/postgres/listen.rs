//! Release notifications over LISTEN/NOTIFY: one listening connection per
//! store, opened at the first wait. A notification carries the released
//! name and, after a unit separator (`chr(31)`, which no name holds), the
//! owner next in line; [`Turns`] wakes that waiter only. When the
//! connection drops, every waiter is woken to re-check, and the next wait
//! reopens it.

use std::sync::Arc;

use tokio_postgres::{AsyncMessage, Client};

use super::conn;
use crate::backend::turns::{TurnWakeup, Turns};
use crate::error::Result;
use crate::url::PostgresUrl;

/// Separates the name from the next owner in a notification.
pub const SEPARATOR: char = '\u{1f}';

/// The listening side of a store.
pub struct Listener {
    url: PostgresUrl,
    address: String,
    channel: String,
    turns: Turns,
    client: tokio::sync::Mutex<Option<Client>>,
}

impl Listener {
    pub fn new(url: PostgresUrl, address: String, channel: String) -> Arc<Self> {
        Arc::new(Listener {
            url,
            address,
            channel,
            turns: Turns::default(),
            client: tokio::sync::Mutex::new(None),
        })
    }

    /// A wakeup for `name`, for the turns of `owner` (its hex id) or, with
    /// `None`, for every release; the LISTEN is active when this returns.
    pub async fn subscribe(&self, name: &str, owner: Option<&str>) -> Result<TurnWakeup> {
        let (wakeup, _) = self
            .turns
            .register(name.as_bytes(), owner.map(str::as_bytes));
        let mut slot = self.client.lock().await;
        if slot.as_ref().is_none_or(Client::is_closed) {
            let (on_message, on_close) = (self.turns.clone(), self.turns.clone());
            let client = conn::open(
                &self.url,
                &self.address,
                move |message| {
                    if let AsyncMessage::Notification(n) = message {
                        let (name, next) = n
                            .payload()
                            .split_once(SEPARATOR)
                            .unwrap_or((n.payload(), ""));
                        on_message.notify(name.as_bytes(), next.as_bytes());
                    }
                },
                move || on_close.notify_everyone(),
            )
            .await?;
            client
                .batch_execute(&format!("LISTEN {}", self.channel))
                .await
                .map_err(|e| conn::pg_error(&self.address, &e))?;
            *slot = Some(client);
        }
        Ok(wakeup)
    }
}
