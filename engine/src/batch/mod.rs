//! Kafka RecordBatch v2: header layout, validation, and the two fields the broker sets.
//!
//! Layout (big-endian): baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 |
//! crc u32 | attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records…
//! The CRC-32C covers everything from `attributes` to the end, so rewriting the base offset or
//! the leader epoch keeps the producer's CRC valid.

pub mod records;

use thiserror::Error;

pub const BASE_OFFSET_POS: usize = 0;
pub const BATCH_LENGTH_POS: usize = 8;
pub const LEADER_EPOCH_POS: usize = 12;
pub const MAGIC_POS: usize = 16;
pub const CRC_POS: usize = 17;
pub const ATTRIBUTES_POS: usize = 21;
pub const LAST_OFFSET_DELTA_POS: usize = 23;
pub const BASE_TIMESTAMP_POS: usize = 27;
pub const MAX_TIMESTAMP_POS: usize = 35;
pub const PRODUCER_ID_POS: usize = 43;
pub const PRODUCER_EPOCH_POS: usize = 51;
pub const BASE_SEQUENCE_POS: usize = 53;
pub const RECORDS_COUNT_POS: usize = 57;
/// Size of the fixed header; the records follow it.
pub const HEADER_BYTES: usize = 61;
/// Bytes before the part that `batchLength` counts.
pub const LOG_OVERHEAD_BYTES: usize = 12;
pub const MAGIC_V2: i8 = 2;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_LOG_APPEND: i16 = 0x08;
const TRANSACTIONAL_FLAG: i16 = 0x10;
const CONTROL_FLAG: i16 = 0x20;

/// Why a batch was refused. Each variant names the fault.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    #[error("record batch of {len} bytes is shorter than the {HEADER_BYTES}-byte v2 header")]
    TooShort { len: usize },
    #[error(
        "record batch declares batchLength {declared} but {actual} bytes follow the length field"
    )]
    LengthMismatch { declared: i64, actual: usize },
    #[error("record batch magic is {0}; only magic 2 (Kafka 0.11+) is supported")]
    UnsupportedMagic(i8),
    #[error("record batch CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("record batch has {count} records but lastOffsetDelta {last_offset_delta}")]
    RecordCountMismatch { count: i32, last_offset_delta: i32 },
    #[error("record batch has invalid compression codec {0}")]
    InvalidCompression(i16),
    #[error("record batch of {len} bytes exceeds the limit of {max_bytes} bytes")]
    TooLarge { len: usize, max_bytes: usize },
    #[error("invalid records: {0}")]
    InvalidRecords(String),
    #[error("record batch inflates past {max_bytes} bytes; refused (decompression bound)")]
    DecompressedTooLarge { max_bytes: u64 },
    #[error("record {record} has no key; a compacted topic (cleanup.policy=compact) accepts only keyed records")]
    MissingKey { record: i32 },
    /// Records whose CreateTime lies outside the topic's `message.timestamp.before.max.ms` /
    /// `message.timestamp.after.max.ms` around the broker's clock (Kafka's INVALID_TIMESTAMP).
    #[error("{0}")]
    InvalidTimestamp(Box<BadTimestamps>),
}

/// The records of a batch whose timestamps a topic refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTimestamps {
    /// (index in the batch, timestamp) of the first bad records, at most
    /// `record_check::MAX_LISTED_BAD_TIMESTAMPS`.
    pub records: Vec<(i32, i64)>,
    /// How many records are bad, listed or not.
    pub count: usize,
    /// The timestamps the topic accepts at the time of the check.
    pub window: crate::config::TimestampWindow,
}

impl BadTimestamps {
    /// What Kafka tells the client about one bad record (a produce answer's record error).
    pub fn record_message(&self, timestamp_ms: i64, record: i32) -> String {
        format!(
            "Timestamp {timestamp_ms} of message with offset {record} is out of range. The timestamp should be within [{}, {}]",
            self.window.earliest_ms, self.window.latest_ms
        )
    }
}

impl std::fmt::Display for BadTimestamps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "One or more records have been rejected due to invalid timestamp: {} record(s) outside [{}, {}] (message.timestamp.before.max.ms and message.timestamp.after.max.ms around the broker's clock)",
            self.count, self.window.earliest_ms, self.window.latest_ms
        )?;
        if let Some((record, ts)) = self.records.first() {
            write!(f, ", the first: record {record} at {ts}")?;
        }
        Ok(())
    }
}

/// The parsed fixed header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Total size of the batch in bytes, header included.
    pub size_bytes: usize,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    pub fn compression(&self) -> i16 {
        self.attributes & COMPRESSION_MASK
    }
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_LOG_APPEND != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }
    /// Number of offsets the batch takes.
    pub fn offset_count(&self) -> u64 {
        self.last_offset_delta as u64 + 1
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
}

fn be_i16(b: &[u8], pos: usize) -> i16 {
    i16::from_be_bytes(b[pos..pos + 2].try_into().expect("2 bytes"))
}
fn be_i32(b: &[u8], pos: usize) -> i32 {
    i32::from_be_bytes(b[pos..pos + 4].try_into().expect("4 bytes"))
}
fn be_u32(b: &[u8], pos: usize) -> u32 {
    u32::from_be_bytes(b[pos..pos + 4].try_into().expect("4 bytes"))
}
fn be_i64(b: &[u8], pos: usize) -> i64 {
    i64::from_be_bytes(b[pos..pos + 8].try_into().expect("8 bytes"))
}

/// Total size (header included) that the batch starting at `b` declares, if the first 12 bytes
/// are there. Used by readers that walk a log without validating.
pub fn declared_size(b: &[u8]) -> Option<i64> {
    if b.len() < LOG_OVERHEAD_BYTES {
        return None;
    }
    Some(be_i32(b, BATCH_LENGTH_POS) as i64 + LOG_OVERHEAD_BYTES as i64)
}

/// Parses the header of the batch at the start of `b` without checking the CRC or the length
/// against `b`; `b` must hold at least the header.
pub fn parse_header(b: &[u8]) -> Result<BatchHeader, BatchError> {
    if b.len() < HEADER_BYTES {
        return Err(BatchError::TooShort { len: b.len() });
    }
    let magic = b[MAGIC_POS] as i8;
    if magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic(magic));
    }
    let declared = be_i32(b, BATCH_LENGTH_POS) as i64;
    if declared < (HEADER_BYTES - LOG_OVERHEAD_BYTES) as i64 {
        return Err(BatchError::LengthMismatch {
            declared,
            actual: b.len() - LOG_OVERHEAD_BYTES,
        });
    }
    Ok(BatchHeader {
        base_offset: be_i64(b, BASE_OFFSET_POS),
        size_bytes: declared as usize + LOG_OVERHEAD_BYTES,
        attributes: be_i16(b, ATTRIBUTES_POS),
        last_offset_delta: be_i32(b, LAST_OFFSET_DELTA_POS),
        base_timestamp: be_i64(b, BASE_TIMESTAMP_POS),
        max_timestamp: be_i64(b, MAX_TIMESTAMP_POS),
        producer_id: be_i64(b, PRODUCER_ID_POS),
        producer_epoch: be_i16(b, PRODUCER_EPOCH_POS),
        base_sequence: be_i32(b, BASE_SEQUENCE_POS),
        records_count: be_i32(b, RECORDS_COUNT_POS),
    })
}

/// The length of the whole stored batches at the front of `bytes` that start below `offset`
/// (a read cut at the last stable offset: batches never straddle it).
pub fn bytes_below(bytes: &[u8], offset: u64) -> usize {
    stored_batches(bytes)
        .take_while(|(h, _)| (h.base_offset as u64) < offset)
        .map(|(_, b)| b.len())
        .sum()
}

/// Walks the whole batches of stored log bytes (what `PartitionLog::read` returns), yielding
/// each batch's header and bytes; stops at the first partial or unparsable batch. The one
/// walker over stored batches: fetch accounting, coordinator replay, producer-state rebuild
/// and fan-out all read stored bytes through it (the recovery scan, which must also say why
/// it stopped, is `segment::scan_log`).
pub fn stored_batches(bytes: &[u8]) -> StoredBatches<'_> {
    StoredBatches { rest: bytes }
}

pub struct StoredBatches<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for StoredBatches<'a> {
    type Item = (BatchHeader, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let size = usize::try_from(declared_size(self.rest)?).ok()?;
        if size < HEADER_BYTES || size > self.rest.len() {
            return None;
        }
        let (one, rest) = self.rest.split_at(size);
        let h = parse_header(one).ok()?;
        self.rest = rest;
        Some((h, one))
    }
}

/// The CRC-32C a batch should carry.
pub fn compute_crc(b: &[u8]) -> u32 {
    crc32c::crc32c(&b[ATTRIBUTES_POS..])
}

/// Validates that `b` is exactly one well-formed v2 batch: length, magic, CRC, record count
/// against last offset delta, compression codec.
pub fn validate(b: &[u8]) -> Result<BatchHeader, BatchError> {
    let h = check_frame(b)?;
    check_counts(&h)?;
    Ok(h)
}

/// `validate` for a batch read back from the log: a batch the cleaner filtered keeps its
/// offset range (base offset, last offset delta) but holds fewer records, possibly none.
pub fn validate_stored(b: &[u8]) -> Result<BatchHeader, BatchError> {
    let h = check_frame(b)?;
    if h.last_offset_delta < 0
        || h.records_count < 0
        || h.records_count > h.last_offset_delta.saturating_add(1)
        || h.compression() > 4
    {
        return Err(BatchError::RecordCountMismatch {
            count: h.records_count,
            last_offset_delta: h.last_offset_delta,
        });
    }
    Ok(h)
}

/// The header of `b` if `b` is exactly one batch (its declared length) with a matching CRC.
fn check_frame(b: &[u8]) -> Result<BatchHeader, BatchError> {
    let h = parse_header(b)?;
    if h.size_bytes != b.len() {
        return Err(BatchError::LengthMismatch {
            declared: h.size_bytes as i64 - LOG_OVERHEAD_BYTES as i64,
            actual: b.len() - LOG_OVERHEAD_BYTES,
        });
    }
    let stored = be_u32(b, CRC_POS);
    let computed = compute_crc(b);
    if stored != computed {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    Ok(h)
}

fn check_counts(h: &BatchHeader) -> Result<(), BatchError> {
    if h.last_offset_delta < 0 || h.records_count != h.last_offset_delta.saturating_add(1) {
        return Err(BatchError::RecordCountMismatch {
            count: h.records_count,
            last_offset_delta: h.last_offset_delta,
        });
    }
    // 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    if h.compression() > 4 {
        return Err(BatchError::InvalidCompression(h.compression()));
    }
    Ok(())
}

/// Sets the base offset the log assigned (not covered by the CRC).
pub fn set_base_offset(b: &mut [u8], base_offset: i64) {
    b[BASE_OFFSET_POS..BASE_OFFSET_POS + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// The partition leader epoch the leader stamped into a stored batch (`b` holds at least
/// the header: a parsed batch).
pub fn leader_epoch(b: &[u8]) -> i32 {
    i32::from_be_bytes(
        b[LEADER_EPOCH_POS..LEADER_EPOCH_POS + 4]
            .try_into()
            .expect("four bytes"),
    )
}

/// Sets the partition leader epoch (not covered by the CRC).
pub fn set_leader_epoch(b: &mut [u8], epoch: i32) {
    b[LEADER_EPOCH_POS..LEADER_EPOCH_POS + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Turns the batch into a LogAppendTime batch stamped `append_time_ms`, as Kafka does for a
/// topic with `message.timestamp.type=LogAppendTime`: attribute bit, max timestamp, new CRC.
pub fn stamp_log_append_time(b: &mut [u8], append_time_ms: i64) {
    let attrs = be_i16(b, ATTRIBUTES_POS) | TIMESTAMP_TYPE_LOG_APPEND;
    b[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attrs.to_be_bytes());
    b[MAX_TIMESTAMP_POS..MAX_TIMESTAMP_POS + 8].copy_from_slice(&append_time_ms.to_be_bytes());
    let crc = compute_crc(b);
    b[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
}

/// The batch `b` (its header) around another records section `section` written with codec
/// `codec` (0 none … 4 zstd): compression bits, batch length and CRC made to match. For
/// builders of compressed batches and of test and fuzz inputs.
pub fn with_records_section(b: &[u8], codec: i16, section: &[u8]) -> Vec<u8> {
    let mut out = b[..HEADER_BYTES].to_vec();
    out.extend_from_slice(section);
    let attrs = (be_i16(&out, ATTRIBUTES_POS) & !COMPRESSION_MASK) | (codec & COMPRESSION_MASK);
    out[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attrs.to_be_bytes());
    let len = (out.len() - LOG_OVERHEAD_BYTES) as i32;
    out[BATCH_LENGTH_POS..BATCH_LENGTH_POS + 4].copy_from_slice(&len.to_be_bytes());
    let crc = compute_crc(&out);
    out[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The longest zig-zag varlong, in bytes (the 10th carries one bit).
pub const MAX_VARLONG_BYTES: usize = 10;

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarlongError {
    /// The bytes end inside it.
    Truncated,
    /// It runs past [`MAX_VARLONG_BYTES`] (or its 10th byte overflows 64 bits).
    TooLong,
}

/// Kafka's zig-zag varlong (varints are the same, range-checked by the caller) at the start
/// of `b`: its value and length. The one varint reader of the engine.
pub fn decode_varlong(b: &[u8]) -> Result<(i64, usize), VarlongError> {
    let mut raw: u64 = 0;
    for (i, &byte) in b.iter().take(MAX_VARLONG_BYTES).enumerate() {
        if i == MAX_VARLONG_BYTES - 1 && byte > 1 {
            return Err(VarlongError::TooLong);
        }
        raw |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((((raw >> 1) as i64) ^ -((raw & 1) as i64), i + 1));
        }
    }
    if b.len() < MAX_VARLONG_BYTES {
        Err(VarlongError::Truncated)
    } else {
        Err(VarlongError::TooLong)
    }
}

/// Appends `v` as Kafka's zig-zag varlong: the one writer beside [`decode_varlong`].
pub(crate) fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let b = (u & 0x7f) as u8;
        u >>= 7;
        if u == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Reads a zig-zag varint (Kafka's varint/varlong) at `*pos`, moving `*pos` past it.
pub(crate) fn read_varlong(b: &[u8], pos: &mut usize) -> Option<i64> {
    let (v, n) = decode_varlong(b.get(*pos..)?).ok()?;
    *pos += n;
    Some(v)
}

/// The offset and timestamp of the first record of a batch whose timestamp is ≥ `target_ms`.
/// Compressed batches are decompressed (this is not an append path). `None` when no record
/// qualifies or the records cannot be read. For LogAppendTime batches every record carries the
/// batch's max timestamp.
pub fn first_offset_at_or_after(b: &[u8], h: &BatchHeader, target_ms: i64) -> Option<(i64, i64)> {
    if h.is_log_append_time() {
        return (h.max_timestamp >= target_ms).then_some((h.base_offset, h.max_timestamp));
    }
    let section = match records::section(b, h) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read a batch's records for a timestamp lookup");
            return None;
        }
    };
    records::parse(&section, h)
        .ok()?
        .into_iter()
        .find(|r| r.timestamp_ms >= target_ms)
        .map(|r| (h.base_offset + r.offset_delta as i64, r.timestamp_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        put_varlong(&mut out, v);
        out
    }

    #[test]
    fn varlongs_round_trip_and_malformed_ones_say_why() {
        for v in [
            0,
            1,
            -1,
            63,
            -64,
            64,
            300,
            i32::MAX as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut b = encode(v);
            let n = b.len();
            assert!(n <= MAX_VARLONG_BYTES);
            b.push(0xff); // what follows is not read
            assert_eq!(decode_varlong(&b), Ok((v, n)), "{v}");
            let mut pos = 0;
            assert_eq!(read_varlong(&b, &mut pos), Some(v));
            assert_eq!(pos, n);
            assert_eq!(decode_varlong(&b[..n - 1]), Err(VarlongError::Truncated));
        }
        assert_eq!(decode_varlong(&[]), Err(VarlongError::Truncated));
        assert_eq!(decode_varlong(&[0x80; 11]), Err(VarlongError::TooLong));
        // A 10th byte above 1 would overflow 64 bits.
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(decode_varlong(&over), Err(VarlongError::TooLong));
    }
}
