//! Histograms (µs, hdrhistogram) and the figures reported from them.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency tracked: one hour in µs (larger values saturate).
pub const MAX_US: u64 = 3_600_000_000;

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("histogram bounds")
}

/// Records one latency in µs (clamped to 1 µs .. 1 h).
pub fn record(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.max(1));
}

/// The percentiles OMB reports, plus max and mean, in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p75_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub p9999_ms: f64,
    pub max_ms: f64,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            mean_ms: h.mean() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.50)),
            p75_ms: ms(h.value_at_quantile(0.75)),
            p95_ms: ms(h.value_at_quantile(0.95)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            p9999_ms: ms(h.value_at_quantile(0.9999)),
            max_ms: ms(h.max()),
        }
    }

    /// (name, value) pairs in report order.
    pub fn fields(&self) -> [(&'static str, f64); 8] {
        [
            ("p50", self.p50_ms),
            ("p75", self.p75_ms),
            ("p95", self.p95_ms),
            ("p99", self.p99_ms),
            ("p99.9", self.p999_ms),
            ("p99.99", self.p9999_ms),
            ("max", self.max_ms),
            ("mean", self.mean_ms),
        ]
    }
}

/// Points of a percentile curve: x = log10(1/(1-p)), y = latency in ms.
pub fn percentile_curve(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let xmax = (h.len() as f64).log10().clamp(1.0, 6.0);
    let mut pts = Vec::new();
    let mut x = 0.0;
    while x < xmax {
        let q = 1.0 - 10f64.powf(-x);
        pts.push((x, ms(h.value_at_quantile(q))));
        x += 0.02;
    }
    pts.push((xmax, ms(h.max())));
    pts
}
