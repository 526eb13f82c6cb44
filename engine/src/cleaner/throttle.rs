//! The cleaner's pacing: its I/O throttle (`log-cleaner-io-max-bytes-per-second`), a virtual
//! clock that each read or written byte advances (the cleaner sleeps when it runs ahead by
//! more than a short burst), and its CPU slices: glommio preempts a `Latency::NotImportant`
//! task queue only every 100 ms, so the cleaner hands the core back itself every
//! `CLEANER_CPU_SLICE_US`.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How far ahead of its rate the cleaner may run before it sleeps.
pub const THROTTLE_BURST_MS: u64 = 100;

/// Longest stretch of CPU the cleaner takes before it lets the core's other task queues
/// (produce, fetch) run.
pub const CLEANER_CPU_SLICE_US: u64 = 500;

pub struct Throttle {
    bytes_per_second: Option<u64>,
    next_free: Cell<Instant>,
    slice_start: Cell<Instant>,
}

impl Throttle {
    /// `None` (or 0): unthrottled.
    pub fn new(bytes_per_second: Option<u64>) -> Self {
        Self {
            bytes_per_second: bytes_per_second.filter(|&r| r > 0),
            next_free: Cell::new(Instant::now()),
            slice_start: Cell::new(Instant::now()),
        }
    }

    /// Yields the cleaner's task queue once it has run for a slice, so other queues' ready
    /// tasks run first; the cleaner resumes when they are done.
    pub async fn slice(&self) {
        if self.slice_start.get().elapsed() >= Duration::from_micros(CLEANER_CPU_SLICE_US) {
            glommio::executor().yield_task_queue_now().await;
            self.slice_start.set(Instant::now());
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
