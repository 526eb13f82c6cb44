//! A fixed-bucket latency histogram (Prometheus-style cumulative buckets), cheap enough to
//! record on every flush or request of a core. Per core, never shared across threads.

use std::time::Duration;

/// Upper bounds of the buckets, in microseconds (the last bucket is +Inf).
pub const LATENCY_BUCKETS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 10_000_000,
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyHistogram {
    /// Per bucket (not cumulative); one more than `LATENCY_BUCKETS_US` for +Inf.
    pub counts: Vec<u64>,
    pub sum_us: u64,
    pub count: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            counts: vec![0; LATENCY_BUCKETS_US.len() + 1],
            sum_us: 0,
            count: 0,
        }
    }
}

impl LatencyHistogram {
    pub fn record(&mut self, d: Duration) {
        let us = d.as_micros().min(u64::MAX as u128) as u64;
        let i = LATENCY_BUCKETS_US.partition_point(|&b| b < us);
        self.counts[i] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.count += 1;
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum_us += other.sum_us;
        self.count += other.count;
    }

    /// The upper bound (µs) of the bucket holding quantile `q`; `None` when empty or in +Inf.
    pub fn quantile_upper_bound_us(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return LATENCY_BUCKETS_US.get(i).copied();
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_quantiles() {
        let mut h = LatencyHistogram::default();
        for us in [10, 60, 60, 900, 20_000_000] {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.count, 5);
        assert_eq!(h.counts[0], 1);
        assert_eq!(h.counts[1], 2);
        assert_eq!(*h.counts.last().unwrap(), 1);
        assert_eq!(h.quantile_upper_bound_us(0.5), Some(100));
        assert_eq!(h.quantile_upper_bound_us(0.8), Some(1_000));
        assert_eq!(h.quantile_upper_bound_us(1.0), None);
    }
}
