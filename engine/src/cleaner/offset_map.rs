//! The cleaner's key → latest offset map, of a fixed size (`log-cleaner-dedupe-buffer-bytes`),
//! as Kafka's `SkimpyOffsetMap`: keys are kept as 128-bit hashes (two SipHash-1-3 with keys
//! drawn for this map, so collisions are as unlikely as Kafka's MD5 and cannot be aimed at),
//! in one open-addressing table that never grows. When it is full the pass ends there and the
//! rest of the dirty log waits for the next pass.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// Bytes of the dedupe buffer one slot takes (a 16-byte hash and an 8-byte offset).
pub const OFFSET_MAP_SLOT_BYTES: usize = 24;
/// Share of the slots that may be used (Kafka's `log.cleaner.io.buffer.load.factor` is 0.9;
/// linear probing wants a little more room).
const LOAD_NUMERATOR: usize = 3;
const LOAD_DENOMINATOR: usize = 4;

pub struct OffsetMap {
    /// 0 = empty slot; a stored hash always has its top bit set.
    hashes: Vec<u128>,
    offsets: Vec<u64>,
    used: usize,
    max_used: usize,
    seeds: (RandomState, RandomState),
}

impl OffsetMap {
    /// A map within `buffer_bytes`, no larger than needed for `max_keys` keys (the offsets of
    /// the dirty range bound how many keys it can hold).
    pub fn new(buffer_bytes: usize, max_keys: u64) -> Self {
        let by_budget = (buffer_bytes / OFFSET_MAP_SLOT_BYTES).max(2);
        let by_need = usize::try_from(max_keys)
            .unwrap_or(usize::MAX)
            .saturating_mul(LOAD_DENOMINATOR)
            / LOAD_NUMERATOR
            + 2;
        let slots = by_budget.min(by_need);
        Self {
            hashes: vec![0; slots],
            offsets: vec![0; slots],
            used: 0,
            max_used: (slots * LOAD_NUMERATOR / LOAD_DENOMINATOR).max(1),
            seeds: (RandomState::new(), RandomState::new()),
        }
    }

    fn hash(&self, key: &[u8]) -> u128 {
        let mut a = self.seeds.0.build_hasher();
        a.write(key);
        let mut b = self.seeds.1.build_hasher();
        b.write(key);
        ((a.finish() as u128) << 64 | b.finish() as u128) | (1u128 << 127)
    }

    fn slot(&self, h: u128) -> (usize, bool) {
        let n = self.hashes.len();
        let mut i = (h as u64 as usize) % n;
        loop {
            match self.hashes[i] {
                0 => return (i, false),
                x if x == h => return (i, true),
                _ => i = (i + 1) % n,
            }
        }
    }

    /// Records `offset` as the latest of `key`. `false` (nothing changed) when the key is new
    /// and the map is full.
    pub fn put(&mut self, key: &[u8], offset: u64) -> bool {
        let h = self.hash(key);
        let (i, found) = self.slot(h);
        if !found {
            if self.used >= self.max_used {
                return false;
            }
            self.hashes[i] = h;
            self.used += 1;
        }
        debug_assert!(!found || self.offsets[i] <= offset, "offsets only grow");
        self.offsets[i] = offset;
        true
    }

    pub fn get(&self, key: &[u8]) -> Option<u64> {
        let (i, found) = self.slot(self.hash(key));
        found.then(|| self.offsets[i])
    }

    pub fn len(&self) -> usize {
        self.used
    }

    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Whether a batch of `keys` more keys might not fit.
    pub fn has_room_for(&self, keys: usize) -> bool {
        self.used + keys <= self.max_used
    }

    /// Bytes the map holds.
    pub fn size_bytes(&self) -> usize {
        self.hashes.len() * OFFSET_MAP_SLOT_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_offset_per_key_within_its_budget() {
        let mut m = OffsetMap::new(24 * 1000, u64::MAX);
        assert_eq!(m.size_bytes(), 24 * 1000);
        for round in 0..3u64 {
            for k in 0..500u64 {
                assert!(m.put(format!("key-{k}").as_bytes(), round * 1000 + k));
            }
        }
        assert_eq!(m.len(), 500);
        assert_eq!(m.get(b"key-7"), Some(2007));
        assert_eq!(m.get(b"nope"), None);
        // Full at 75% of 1000 slots: new keys are refused, known ones still update.
        let mut added = 500;
        while m.put(format!("more-{added}").as_bytes(), 5000) {
            added += 1;
        }
        assert_eq!(m.len(), 750);
        assert!(m.put(b"key-7", 6000));
        assert_eq!(m.get(b"key-7"), Some(6000));
        // Sized by need when the dirty range is small.
        assert!(OffsetMap::new(1 << 30, 10).size_bytes() < 1000);
    }
}
