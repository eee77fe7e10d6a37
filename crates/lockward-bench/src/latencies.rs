//! A latency distribution: an HdrHistogram of nanoseconds, three
//! significant digits from 1 ns to an hour, so a million samples cost the
//! same few kilobytes as ten.

use std::time::Duration;

use hdrhistogram::Histogram;

/// The quantiles a latency curve is drawn through (`Latencies::curve`).
pub const CURVE_QUANTILES: [f64; 12] = [
    0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0,
];

/// Recorded latencies.
///
/// ```
/// use std::time::Duration;
/// use lockward_bench::Latencies;
///
/// let mut l = Latencies::new();
/// for ms in 1..=100 {
///     l.record(Duration::from_millis(ms));
/// }
/// assert_eq!(l.len(), 100);
/// let p50 = l.quantile(0.5).as_secs_f64();
/// assert!((0.0495..0.0505).contains(&p50), "{p50}");
/// ```
#[derive(Clone)]
pub struct Latencies {
    hist: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Latencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latencies")
            .field("len", &self.len())
            .field("p50", &self.quantile(0.5))
            .field("max", &self.max())
            .finish()
    }
}

const HOUR_NS: u64 = 3_600_000_000_000;

impl Latencies {
    /// An empty distribution.
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(1, HOUR_NS, 3)
            .expect("1 ns to an hour at 3 digits is a valid histogram");
        Self { hist }
    }

    /// Adds one sample (longer than an hour counts as an hour).
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(HOUR_NS);
        self.hist.saturating_record(ns.clamp(1, HOUR_NS));
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Latencies) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    /// How many samples.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// No samples yet.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The `p`-th quantile (0.0–1.0); zero when empty.
    pub fn quantile(&self, p: f64) -> Duration {
        if self.is_empty() {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.hist.value_at_quantile(p.clamp(0.0, 1.0)))
    }

    /// The mean sample; zero when empty.
    pub fn mean(&self) -> Duration {
        Duration::from_nanos(self.hist.mean() as u64)
    }

    /// The longest sample.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.hist.max())
    }

    /// `(quantile, latency)` at each of `CURVE_QUANTILES`, for plots.
    pub fn curve(&self) -> Vec<(f64, Duration)> {
        CURVE_QUANTILES
            .iter()
            .map(|&q| (q, self.quantile(q)))
            .collect()
    }
}
