//! Releases made in this process, by name: a store that cannot push other
//! processes' releases (SQLite) still wakes this process's waiters the
//! moment one of its own holders lets go — all the holders of a daemon
//! serving many clients, for one.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::sync::watch;

use super::Wakeup;
use crate::name::Name;

/// The names this process's waiters wait for.
#[derive(Debug, Default)]
pub(crate) struct LocalReleases(Mutex<HashMap<Name, watch::Sender<()>>>);

impl LocalReleases {
    /// A wakeup at this process's next release of `name`.
    pub(crate) fn subscribe(&self, name: &Name) -> LocalWakeup {
        let mut names = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let sender = names
            .entry(name.clone())
            .or_insert_with(|| watch::channel(()).0);
        LocalWakeup(sender.subscribe())
    }

    /// This process released `name`: its waiters look again now. Names
    /// nobody waits for any more are forgotten.
    pub(crate) fn released(&self, name: &Name) {
        let mut names = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = names.get(name) {
            sender.send_replace(());
        }
        names.retain(|_, sender| sender.receiver_count() > 0);
    }
}

/// One waiter's wakeup from [`LocalReleases`].
pub(crate) struct LocalWakeup(watch::Receiver<()>);

#[async_trait]
impl Wakeup for LocalWakeup {
    async fn changed(&mut self) {
        if self.0.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    fn mark_seen(&mut self) {
        self.0.borrow_and_update();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_release_wakes_the_waiters_of_its_name_only() {
        let releases = LocalReleases::default();
        let (a, b) = (Name::new("a").unwrap(), Name::new("b").unwrap());
        let mut on_a = releases.subscribe(&a);
        let mut on_b = releases.subscribe(&b);
        releases.released(&a);
        tokio::time::timeout(Duration::from_secs(1), on_a.changed())
            .await
            .expect("woken");
        let quiet = tokio::time::timeout(Duration::from_millis(50), on_b.changed()).await;
        assert!(quiet.is_err(), "a release of a woke b's waiter");
        drop((on_a, on_b));
        releases.released(&b);
        assert!(releases.0.lock().unwrap().is_empty(), "forgotten");
    }
}
