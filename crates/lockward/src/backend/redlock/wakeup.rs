//! Waiting on every master at once: a release published on any of them
//! wakes the waiter.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use async_trait::async_trait;

use crate::backend::redis::channels::ChannelWakeup;
use crate::backend::Wakeup;

/// Resolves when any of its masters' channels fires.
pub struct AnyMaster(pub Vec<ChannelWakeup>);

#[async_trait]
impl Wakeup for AnyMaster {
    async fn changed(&mut self) {
        let mut pending: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> =
            self.0.iter_mut().map(|w| w.changed()).collect();
        if pending.is_empty() {
            return std::future::pending().await;
        }
        std::future::poll_fn(|cx| {
            for fut in pending.iter_mut() {
                if fut.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
            }
            Poll::Pending
        })
        .await
    }

    fn mark_seen(&mut self) {
        for w in &mut self.0 {
            w.mark_seen();
        }
    }
}
