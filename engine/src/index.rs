//! On-disk index entries of a segment.
//!
//! `.index` (engine-owned layout, one entry per batch, 16 bytes big-endian):
//! `relative_offset u32 | position u32 | commit_time_ms i64`. It locates batches (binary search
//! on offset) and keeps each batch's commit time beside the batch, so the batch bytes stay as
//! the producer sent them and the commit time survives restart. One entry per batch keeps the
//! index sparse over records (a batch holds many) while giving exact batch boundaries.
//!
//! `.timeindex` (Kafka's layout, sparse, 12 bytes big-endian): `timestamp_ms i64 |
//! relative_offset u32`, one entry each time the segment's max record timestamp grows after at
//! least `index_interval_bytes` of log since the last entry.

pub const OFFSET_ENTRY_BYTES: usize = 16;
pub const TIME_ENTRY_BYTES: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
    pub commit_time_ms: i64,
}

impl OffsetEntry {
    pub fn encode(&self) -> [u8; OFFSET_ENTRY_BYTES] {
        let mut b = [0u8; OFFSET_ENTRY_BYTES];
        b[0..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        b[4..8].copy_from_slice(&self.position.to_be_bytes());
        b[8..16].copy_from_slice(&self.commit_time_ms.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Self {
        Self {
            relative_offset: u32::from_be_bytes(b[0..4].try_into().expect("4 bytes")),
            position: u32::from_be_bytes(b[4..8].try_into().expect("4 bytes")),
            commit_time_ms: i64::from_be_bytes(b[8..16].try_into().expect("8 bytes")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp_ms: i64,
    pub relative_offset: u32,
}

impl TimeEntry {
    pub fn encode(&self) -> [u8; TIME_ENTRY_BYTES] {
        let mut b = [0u8; TIME_ENTRY_BYTES];
        b[0..8].copy_from_slice(&self.timestamp_ms.to_be_bytes());
        b[8..12].copy_from_slice(&self.relative_offset.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Self {
        Self {
            timestamp_ms: i64::from_be_bytes(b[0..8].try_into().expect("8 bytes")),
            relative_offset: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
        }
    }
}

/// Decodes offset-index entries, stopping at the first entry that breaks the index's order
/// (zero padding after the last block write, or a torn tail): offsets and positions strictly
/// increase, commit times never decrease and are positive.
pub fn decode_offset_entries(b: &[u8]) -> Vec<OffsetEntry> {
    let mut out: Vec<OffsetEntry> = Vec::with_capacity(b.len() / OFFSET_ENTRY_BYTES);
    for chunk in b.chunks_exact(OFFSET_ENTRY_BYTES) {
        let e = OffsetEntry::decode(chunk);
        let ordered = match out.last() {
            None => e.position == 0 && e.commit_time_ms > 0,
            Some(p) => {
                e.relative_offset > p.relative_offset
                    && e.position > p.position
                    && e.commit_time_ms >= p.commit_time_ms
            }
        };
        if !ordered {
            break;
        }
        out.push(e);
    }
    out
}

/// Decodes time-index entries, stopping at the first one that breaks the order (timestamps and
/// offsets strictly increase after the first).
pub fn decode_time_entries(b: &[u8]) -> Vec<TimeEntry> {
    let mut out: Vec<TimeEntry> = Vec::with_capacity(b.len() / TIME_ENTRY_BYTES);
    for chunk in b.chunks_exact(TIME_ENTRY_BYTES) {
        let e = TimeEntry::decode(chunk);
        if let Some(p) = out.last() {
            if e.timestamp_ms <= p.timestamp_ms || e.relative_offset <= p.relative_offset {
                break;
            }
        }
        out.push(e);
    }
    out
}

/// Index of the batch that holds `relative_offset`: the last entry at or below it.
pub fn find_batch(entries: &[OffsetEntry], relative_offset: u32) -> Option<usize> {
    let n = entries.partition_point(|e| e.relative_offset <= relative_offset);
    n.checked_sub(1)
}

/// Start point for a timestamp search: the last entry with a timestamp below `target_ms`
/// (every batch before it has only older records), or the segment start.
pub fn time_lookup(entries: &[TimeEntry], target_ms: i64) -> u32 {
    let n = entries.partition_point(|e| e.timestamp_ms < target_ms);
    match n {
        0 => 0,
        n => entries[n - 1].relative_offset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_entries_stop_at_padding_and_disorder() {
        let a = OffsetEntry {
            relative_offset: 0,
            position: 0,
            commit_time_ms: 5,
        };
        let b = OffsetEntry {
            relative_offset: 10,
            position: 100,
            commit_time_ms: 5,
        };
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&a.encode());
        bytes.extend_from_slice(&b.encode());
        bytes.extend_from_slice(&[0u8; 40]);
        assert_eq!(decode_offset_entries(&bytes), vec![a, b]);
        assert_eq!(find_batch(&[a, b], 0), Some(0));
        assert_eq!(find_batch(&[a, b], 9), Some(0));
        assert_eq!(find_batch(&[a, b], 10), Some(1));
        assert_eq!(find_batch(&[a, b], 99), Some(1));
        assert_eq!(find_batch(&[], 0), None);
    }

    #[test]
    fn time_lookup_starts_before_target() {
        let e = [
            TimeEntry {
                timestamp_ms: 100,
                relative_offset: 0,
            },
            TimeEntry {
                timestamp_ms: 200,
                relative_offset: 7,
            },
        ];
        assert_eq!(time_lookup(&e, 50), 0);
        assert_eq!(time_lookup(&e, 150), 0);
        assert_eq!(time_lookup(&e, 201), 7);
        let mut bytes = e[0].encode().to_vec();
        bytes.extend_from_slice(&e[1].encode());
        bytes.extend_from_slice(&[0u8; 12]);
        assert_eq!(decode_time_entries(&bytes), e.to_vec());
    }
}
