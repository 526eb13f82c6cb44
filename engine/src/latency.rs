//! A latency histogram on `hdrhistogram` (the design card's choice): every value from 1 µs to
//! `LATENCY_HIGHEST_US` kept to `LATENCY_SIGNIFICANT_DIGITS` significant digits, so a
//! percentile is exact to 0.1 % instead of "somewhere between two bucket edges". Recorded on
//! the core that owns it (plain `&mut`, no atomics, no locks); a scrape clones it, and the
//! difference of two clones ([`LatencyHistogram::since`]) is the histogram of the interval
//! between them, so any number of scrapers each get their own interval.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Smallest value told apart from zero, in microseconds.
pub const LATENCY_LOWEST_US: u64 = 1;
/// Largest value kept exactly, in microseconds (one minute); longer ones count as this.
pub const LATENCY_HIGHEST_US: u64 = 60_000_000;
/// Significant decimal digits every recorded value keeps (3: within 0.1 %).
pub const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

/// Upper bounds of the Prometheus histogram buckets derived from a [`LatencyHistogram`], in
/// microseconds (a `+Inf` bucket follows).
pub const PROMETHEUS_BUCKETS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 10_000_000,
];

#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    /// Sum of the recorded values as given (before clamping), for Prometheus' `_sum`.
    sum_us: u64,
}

/// The percentiles of a histogram, in microseconds (all 0 when it is empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencyPercentiles {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        let hist = Histogram::new_with_bounds(
            LATENCY_LOWEST_US,
            LATENCY_HIGHEST_US,
            LATENCY_SIGNIFICANT_DIGITS,
        )
        .expect("the latency bounds are valid hdrhistogram bounds");
        Self { hist, sum_us: 0 }
    }
}

impl LatencyHistogram {
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.record_us(us);
    }

    /// Records `us` microseconds; values past `LATENCY_HIGHEST_US` count as that.
    pub fn record_us(&mut self, us: u64) {
        self.hist.saturating_record(us.max(LATENCY_LOWEST_US));
        self.sum_us = self.sum_us.saturating_add(us);
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.hist
            .add(&other.hist)
            .expect("histograms of the same bounds always add");
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    pub fn sum_us(&self) -> u64 {
        self.sum_us
    }

    /// The histogram of what was recorded after `earlier`, a clone of this one taken before.
    /// A histogram that was reset in between (a partition reopened on another core) gives
    /// everything it holds now.
    pub fn since(&self, earlier: &LatencyHistogram) -> LatencyHistogram {
        let mut h = self.clone();
        if h.hist.subtract(&earlier.hist).is_err() || earlier.sum_us > self.sum_us {
            return self.clone();
        }
        h.sum_us = self.sum_us - earlier.sum_us;
        h
    }

    /// The value at quantile `q` (0..=1) in microseconds; `None` when empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        (self.count() > 0).then(|| self.hist.value_at_quantile(q))
    }

    pub fn percentiles(&self) -> LatencyPercentiles {
        if self.count() == 0 {
            return LatencyPercentiles::default();
        }
        LatencyPercentiles {
            count: self.count(),
            p50_us: self.hist.value_at_quantile(0.50),
            p99_us: self.hist.value_at_quantile(0.99),
            p999_us: self.hist.value_at_quantile(0.999),
            max_us: self.hist.max(),
        }
    }

    /// Cumulative Prometheus buckets: (upper bound in seconds, values at or below it), one per
    /// `PROMETHEUS_BUCKETS_US` entry; the `+Inf` bucket is [`LatencyHistogram::count`].
    pub fn prometheus_buckets(&self) -> Vec<(f64, u64)> {
        PROMETHEUS_BUCKETS_US
            .iter()
            .map(|&us| {
                // Values equivalent to `us` (within the histogram's precision) count as at it.
                let upto = self.hist.highest_equivalent(us);
                (us as f64 / 1e6, self.hist.count_between(0, upto))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_exact_to_the_precision() {
        let mut h = LatencyHistogram::default();
        for us in 1..=10_000u64 {
            h.record_us(us);
        }
        let p = h.percentiles();
        assert_eq!(p.count, 10_000);
        let within = |got: u64, want: u64| got.abs_diff(want) * 1000 <= want;
        assert!(within(p.p50_us, 5_000), "{p:?}");
        assert!(within(p.p99_us, 9_900), "{p:?}");
        assert!(within(p.p999_us, 9_990), "{p:?}");
        assert!(within(p.max_us, 10_000), "{p:?}");
        assert_eq!(h.sum_us(), 10_000 * 10_001 / 2);
    }

    #[test]
    fn an_interval_is_the_difference_of_two_clones() {
        let mut h = LatencyHistogram::default();
        for _ in 0..100 {
            h.record_us(100);
        }
        let before = h.clone();
        for _ in 0..10 {
            h.record_us(7_000);
        }
        let interval = h.since(&before);
        assert_eq!(interval.count(), 10);
        assert_eq!(interval.sum_us(), 70_000);
        assert!(interval.percentiles().p50_us.abs_diff(7_000) <= 7);
        // A reset histogram (fewer values than the earlier clone) gives what it holds.
        let fresh = LatencyHistogram::default();
        assert_eq!(fresh.since(&before).count(), 0);
    }

    #[test]
    fn out_of_range_values_saturate_and_buckets_are_cumulative() {
        let mut h = LatencyHistogram::default();
        for us in [0, 10, 60, 60, 900, 120_000_000] {
            h.record_us(us);
        }
        assert_eq!(h.count(), 6);
        assert_eq!(
            h.percentiles().max_us / 1_000_000,
            60,
            "clamped to a minute"
        );
        let b = h.prometheus_buckets();
        assert_eq!(b[0], (50e-6, 2), "0 and 10 µs at or below 50 µs");
        assert_eq!(b[1].1, 4);
        assert!(b.windows(2).all(|w| w[0].1 <= w[1].1));
        assert_eq!(b.last().unwrap().1, 5, "the 2-minute value is past 10 s");
        let mut m = LatencyHistogram::default();
        m.merge(&h);
        m.merge(&h);
        assert_eq!(m.count(), 12);
    }
}
