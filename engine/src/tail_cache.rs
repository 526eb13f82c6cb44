//! The per-core tail cache (`tail-cache-bytes`): copies of the batches most recently appended
//! to each log's active segment, so a fetch at the tail (a consumer keeping up) is served from
//! memory instead of a direct-I/O read. Older data, and everything after a restart, is read
//! from disk as before.
//!
//! Each active segment has a `TailWindow`: its newest bytes, contiguous, by file position (the
//! reads of the active segment are positions computed from its index). One core-wide budget
//! evicts across windows in append order (oldest first): a FIFO of (window, position) entries,
//! bounded in bytes and in entries. A window goes with its segment (roll, close), and its
//! bytes with it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

/// Default bytes of appended batches each core keeps for fetches at the tail.
pub const DEFAULT_TAIL_CACHE_BYTES: u64 = 64 << 20;
/// Batches the cache tracks at most (its FIFO's length), whatever their size.
pub const MAX_TAIL_CACHE_ENTRIES: usize = 1 << 20;

/// Counters of a core's tail cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TailCacheStats {
    /// Reads of an active segment served from memory, and their bytes.
    pub hits: u64,
    pub hit_bytes: u64,
    /// Reads of an active segment that went to disk (not, or no longer, cached).
    pub misses: u64,
    /// Bytes held now.
    pub held_bytes: u64,
}

/// One core's budget and eviction order.
pub struct TailCache {
    limit_bytes: u64,
    used_bytes: Cell<u64>,
    order: RefCell<VecDeque<(Weak<TailWindow>, u64)>>,
    hits: Cell<u64>,
    hit_bytes: Cell<u64>,
    misses: Cell<u64>,
}

impl TailCache {
    pub fn new(limit_bytes: u64) -> Rc<Self> {
        Rc::new(Self {
            limit_bytes,
            used_bytes: Cell::new(0),
            order: RefCell::new(VecDeque::new()),
            hits: Cell::new(0),
            hit_bytes: Cell::new(0),
            misses: Cell::new(0),
        })
    }

    /// A window for a new active segment, or `None` when the cache is off (0 bytes).
    pub fn window(self: &Rc<Self>) -> Option<Rc<TailWindow>> {
        (self.limit_bytes > 0).then(|| {
            Rc::new(TailWindow {
                cache: self.clone(),
                chunks: RefCell::new(VecDeque::new()),
                bytes: Cell::new(0),
            })
        })
    }

    pub fn stats(&self) -> TailCacheStats {
        TailCacheStats {
            hits: self.hits.get(),
            hit_bytes: self.hit_bytes.get(),
            misses: self.misses.get(),
            held_bytes: self.used_bytes.get(),
        }
    }

    fn charge(&self, window: &Rc<TailWindow>, pos: u64, len: u64) {
        self.used_bytes.set(self.used_bytes.get() + len);
        let mut order = self.order.borrow_mut();
        order.push_back((Rc::downgrade(window), pos));
        while self.used_bytes.get() > self.limit_bytes || order.len() > MAX_TAIL_CACHE_ENTRIES {
            let Some((w, pos)) = order.pop_front() else {
                break;
            };
            // A window that is gone gave its bytes back when it dropped; an entry its window
            // no longer holds at the front was dropped by a reset.
            if let Some(w) = w.upgrade() {
                w.pop_front_at(pos);
            }
        }
        debug_assert!(order.len() <= MAX_TAIL_CACHE_ENTRIES);
    }

    fn release(&self, len: u64) {
        let used = self.used_bytes.get();
        assert!(used >= len, "the cache gives back only bytes it holds");
        self.used_bytes.set(used - len);
    }
}

/// The cached tail of one active segment: contiguous chunks by file position.
pub struct TailWindow {
    cache: Rc<TailCache>,
    chunks: RefCell<VecDeque<(u64, Box<[u8]>)>>,
    bytes: Cell<u64>,
}

impl TailWindow {
    /// Caches the batch appended at `pos` (its stored bytes, given in pieces). A batch larger
    /// than the whole budget, or one that does not follow the window, resets the window.
    pub fn push(self: &Rc<Self>, pos: u64, pieces: &[&[u8]]) {
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        let follows = self
            .chunks
            .borrow()
            .back()
            .is_none_or(|(p, b)| p + b.len() as u64 == pos);
        if !follows || len as u64 > self.cache.limit_bytes {
            self.reset();
            if len as u64 > self.cache.limit_bytes {
                return;
            }
        }
        let mut bytes = Vec::with_capacity(len);
        for p in pieces {
            bytes.extend_from_slice(p);
        }
        self.chunks
            .borrow_mut()
            .push_back((pos, bytes.into_boxed_slice()));
        self.bytes.set(self.bytes.get() + len as u64);
        self.cache.charge(self, pos, len as u64);
    }

    /// `len` bytes at `pos`, if the window holds all of them.
    pub fn read(&self, pos: u64, len: u64) -> Option<Vec<u8>> {
        let got = self.copy(pos, len);
        match &got {
            Some(b) => {
                self.cache.hits.set(self.cache.hits.get() + 1);
                self.cache
                    .hit_bytes
                    .set(self.cache.hit_bytes.get() + b.len() as u64);
            }
            None => self.cache.misses.set(self.cache.misses.get() + 1),
        }
        got
    }

    fn copy(&self, pos: u64, len: u64) -> Option<Vec<u8>> {
        let chunks = self.chunks.borrow();
        let (first_pos, _) = chunks.front()?;
        let (last_pos, last) = chunks.back()?;
        if pos < *first_pos || pos + len > last_pos + last.len() as u64 {
            return None;
        }
        let i = chunks.partition_point(|(p, _)| *p <= pos) - 1;
        let mut out = Vec::with_capacity(len as usize);
        let mut at = pos;
        for (p, b) in chunks.range(i..) {
            if at >= pos + len {
                break;
            }
            let from = (at - p) as usize;
            let to = (b.len() as u64).min(pos + len - p) as usize;
            out.extend_from_slice(&b[from..to]);
            at = p + to as u64;
        }
        debug_assert_eq!(
            out.len() as u64,
            len,
            "a contiguous window covers the range"
        );
        Some(out)
    }

    fn pop_front_at(&self, pos: u64) {
        let mut chunks = self.chunks.borrow_mut();
        if chunks.front().is_some_and(|(p, _)| *p == pos) {
            let (_, b) = chunks.pop_front().expect("front");
            self.bytes.set(self.bytes.get() - b.len() as u64);
            self.cache.release(b.len() as u64);
        }
    }

    fn reset(&self) {
        self.chunks.borrow_mut().clear();
        self.cache.release(self.bytes.replace(0));
    }
}

impl Drop for TailWindow {
    fn drop(&mut self) {
        self.cache.release(self.bytes.get());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_contiguous_ranges_and_evicts_oldest_first_across_windows() {
        let cache = TailCache::new(100);
        let a = cache.window().unwrap();
        let b = cache.window().unwrap();
        a.push(0, &[&[1; 30]]);
        a.push(30, &[&[2; 10], &[3; 20]]);
        assert_eq!(a.read(20, 20).unwrap(), [vec![1; 10], vec![2; 10]].concat());
        b.push(4096, &[&[9; 40]]);
        assert_eq!(cache.stats().held_bytes, 100);
        // Over budget: a's first batch (the oldest) goes.
        b.push(4136, &[&[8; 10]]);
        assert_eq!(cache.stats().held_bytes, 80);
        assert!(a.read(0, 10).is_none());
        assert_eq!(a.read(30, 30).unwrap().len(), 30);
        // A batch that does not follow resets the window.
        a.push(1000, &[&[7; 5]]);
        assert!(a.read(30, 1).is_none());
        assert_eq!(cache.stats().held_bytes, 55);
        drop(b);
        assert_eq!(cache.stats().held_bytes, 5);
        // Entries of a dropped window and of a reset are skipped by eviction.
        a.push(1005, &[&[6; 95]]);
        a.push(1100, &[&[5; 10]]);
        assert!(cache.stats().held_bytes <= 100);
        assert_eq!(a.read(1100, 10).unwrap(), vec![5; 10]);
        let s = cache.stats();
        assert!(s.hits >= 3 && s.misses >= 2, "{s:?}");
    }

    #[test]
    fn off_at_zero_bytes_and_oversized_batches_are_not_cached() {
        assert!(TailCache::new(0).window().is_none());
        let cache = TailCache::new(10);
        let w = cache.window().unwrap();
        w.push(0, &[&[1; 11]]);
        assert_eq!(cache.stats().held_bytes, 0);
        assert!(w.read(0, 1).is_none());
    }
}
