//! The store's floor: one round trip of its cheapest write, through the
//! store's own side client (see `lockward::backend::side`). Embedded stores
//! have none.
//!
//! On a small, shared machine a round trip's cost drifts with what else
//! runs, so a ratio is only fair when both sides are sampled at the same
//! moments: [`FloorProbe`] takes one sample at a time, to interleave with
//! the measurement it is compared to.

use std::time::Duration;

use lockward::backend::side::{self, SideClient};
use lockward::StoreUrl;

use super::Latencies;

/// A connection to a store that times one floor round trip at a time.
pub struct FloorProbe {
    client: Box<dyn SideClient>,
}

impl FloorProbe {
    /// Connects to the store of `url`; `None` for an embedded store or when
    /// it cannot be reached.
    pub async fn connect(url: &StoreUrl) -> Option<FloorProbe> {
        let client = side::connect(url).await.ok()??;
        Some(FloorProbe { client })
    }

    /// One round trip of the floor operation; `None` when it failed.
    pub async fn round_trip(&mut self) -> Option<Duration> {
        self.client.floor_round_trip().await.ok()
    }
}

/// Median round trip of the floor operation over `samples`, or `None` for
/// an embedded store or when it cannot be measured.
pub async fn floor(url: &StoreUrl, samples: usize) -> Option<Duration> {
    let mut probe = FloorProbe::connect(url).await?;
    let mut latencies = Latencies::new();
    for _ in 0..samples {
        latencies.record(probe.round_trip().await?);
    }
    Some(latencies.quantile(0.5))
}
