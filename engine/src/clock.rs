//! The wall clock the engine stamps commit times with, behind a trait so tests control it.
//! One per core (`CoreStorage::clock`); the system clock unless a test sets another.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub trait Clock {
    fn now_ms(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        system_now_ms()
    }
}

/// The system wall clock in ms (0 before the epoch).
pub fn system_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A clock that moves only when told (tests): `set` and `advance`.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: Cell<i64>,
}

impl ManualClock {
    pub fn new(now_ms: i64) -> Self {
        Self {
            now_ms: Cell::new(now_ms),
        }
    }
    pub fn set(&self, now_ms: i64) {
        self.now_ms.set(now_ms);
    }
    pub fn advance(&self, by_ms: i64) {
        self.now_ms.set(self.now_ms.get() + by_ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.get()
    }
}
