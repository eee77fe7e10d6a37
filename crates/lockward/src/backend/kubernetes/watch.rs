//! A waiter's watch on one Lease: an event that may have freed it (a
//! release, a deletion, the end of the watch) wakes the waiter to re-check;
//! one that shows a holder (taken, renewed) does not wake it, but is noted
//! as seen, so the waiter's re-check at the holder's expiry counts from
//! the holder's last renewal rather than from its own last read.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{WatchEvent, WatchParams};
use kube::Api;

use super::core::api_error;
use super::lease_record::Record;
use super::observed::Observed;
use crate::backend::Wakeup;
use crate::error::Result;

/// Pause before opening a watch again after the server refused one.
const REOPEN_PAUSE: Duration = Duration::from_millis(500);

type Events = BoxStream<'static, kube::Result<WatchEvent<Lease>>>;

/// A watch on one Lease, opened again when the server ends it.
pub(super) struct LeaseWatch {
    leases: Api<Lease>,
    object: String,
    events: Option<Events>,
    /// Where each holder's record is noted as seen.
    observed: Arc<Observed>,
}

impl LeaseWatch {
    /// Opens the watch and waits until the server accepted it, so that no
    /// change after this call is missed.
    ///
    /// Dropping the future cancels the request.
    pub(super) async fn open(
        leases: Api<Lease>,
        object: String,
        observed: Arc<Observed>,
        address: String,
    ) -> Result<Self> {
        let events = start(&leases, &object)
            .await
            .map_err(|e| api_error(&address, e))?;
        Ok(LeaseWatch {
            leases,
            object,
            events: Some(events),
            observed,
        })
    }
}

/// A watch from "any recent version": the server first sends the Lease as
/// it is, so a watch opened again after a gap wakes the waiter at once.
async fn start(leases: &Api<Lease>, object: &str) -> kube::Result<Events> {
    Ok(leases.watch(&watch_params(object), "0").await?.boxed())
}

#[async_trait]
impl Wakeup for LeaseWatch {
    /// Resolves at the next event that shows the Lease without a holder
    /// (or gone), and when the watch ends (the server ends watches after a
    /// few seconds, or a restart cut it): the waiter re-checks, and the
    /// next call opens it again. An event that shows a holder only notes
    /// its record as seen: a crowd of waiters reads the Lease at the
    /// holder's expiry, not at every take and renewal.
    async fn changed(&mut self) {
        match &mut self.events {
            Some(events) => loop {
                match events.next().await {
                    Some(Ok(WatchEvent::Added(lease) | WatchEvent::Modified(lease))) => {
                        let record = Record::of(lease.spec.as_ref());
                        if record.is_free() {
                            return;
                        }
                        self.observed.saw(&self.object, &record);
                    }
                    Some(Ok(_)) => return,
                    Some(Err(_)) | None => {
                        self.events = None;
                        return;
                    }
                }
            },
            None => match start(&self.leases, &self.object).await {
                Ok(events) => self.events = Some(events),
                Err(_) => tokio::time::sleep(REOPEN_PAUSE).await,
            },
        }
    }
}

/// Watches of one object end on the server's side after this long, before
/// the client's read timeout, and are opened again.
pub(super) fn watch_params(object: &str) -> WatchParams {
    WatchParams::default()
        .fields(&format!("metadata.name={object}"))
        .timeout(10)
}
