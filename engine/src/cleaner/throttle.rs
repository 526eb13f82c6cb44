//! The cleaner's I/O throttle (`log-cleaner-io-max-bytes-per-second`): a virtual clock that
//! each read or written byte advances; the cleaner sleeps when it runs ahead by more than a
//! short burst.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How far ahead of its rate the cleaner may run before it sleeps.
pub const THROTTLE_BURST_MS: u64 = 100;

pub struct Throttle {
    bytes_per_second: Option<u64>,
    next_free: Cell<Instant>,
}

impl Throttle {
    /// `None` (or 0): unthrottled.
    pub fn new(bytes_per_second: Option<u64>) -> Self {
        Self {
            bytes_per_second: bytes_per_second.filter(|&r| r > 0),
            next_free: Cell::new(Instant::now()),
        }
    }

    /// Accounts for `bytes` of cleaner I/O, sleeping if the cleaner is ahead of its rate.
    pub async fn take(&self, bytes: u64) {
        let Some(rate) = self.bytes_per_second else {
            return;
        };
        let now = Instant::now();
        let cost = Duration::from_secs_f64(bytes as f64 / rate as f64);
        let next = self.next_free.get().max(now) + cost;
        self.next_free.set(next);
        let ahead = next.saturating_duration_since(now);
        let burst = Duration::from_millis(THROTTLE_BURST_MS);
        if ahead > burst {
            glommio::timer::sleep(ahead - burst).await;
        }
    }
}
