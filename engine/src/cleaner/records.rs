//! The records of one stored batch as the cleaner sees them, and the batch rebuilt from the
//! records it keeps: same base offset, last offset delta, producer fields and codec (Kafka's
//! `MemoryRecords.filterTo`), so offsets and producer sequences stay as they were.
//!
//! A batch that keeps a tombstone gets a delete horizon (KIP-534): attribute bit 6 set and the
//! base timestamp replaced by the time after which its tombstones may go; record timestamp
//! deltas are re-based so every record keeps its timestamp.

use std::borrow::Cow;

use crate::batch::{
    self, read_varlong, BatchError, BatchHeader, ATTRIBUTES_POS, BASE_TIMESTAMP_POS, HEADER_BYTES,
    MAX_TIMESTAMP_POS, RECORDS_COUNT_POS,
};
use crate::compression;

/// Attribute bit of a batch whose base timestamp is its delete horizon (KIP-534).
pub const DELETE_HORIZON_FLAG: i16 = 0x40;

/// One record of a stored batch.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    pub offset_delta: i32,
    /// Absolute record timestamp (base timestamp + delta).
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    /// A null value: the key is deleted.
    pub tombstone: bool,
    /// The value's bytes (None for a tombstone).
    pub value: Option<&'a [u8]>,
    /// The whole record as stored: its length varint through its last header.
    raw: &'a [u8],
    /// Where in `raw` the fields after the offset delta (key length onwards) start.
    body_from: usize,
    attributes: u8,
}

/// The delete horizon of a batch, if the cleaner set one.
pub fn delete_horizon_ms(h: &BatchHeader) -> Option<i64> {
    (h.attributes & DELETE_HORIZON_FLAG != 0).then_some(h.base_timestamp)
}

fn bad(why: impl Into<String>) -> BatchError {
    BatchError::InvalidRecords(why.into())
}

/// The records section of batch `b`, decompressed (bounded) when the batch is compressed.
pub fn section<'a>(b: &'a [u8], h: &BatchHeader) -> Result<Cow<'a, [u8]>, BatchError> {
    let data = b
        .get(HEADER_BYTES..)
        .ok_or(BatchError::TooShort { len: b.len() })?;
    match h.compression() {
        0 => Ok(Cow::Borrowed(data)),
        codec => compression::decompress(codec, data)
            .map(Cow::Owned)
            .map_err(|e| bad(format!("codec {codec}: {e}"))),
    }
}

/// Parses every record of `section` (the records of batch `h`).
pub fn parse<'a>(section: &'a [u8], h: &BatchHeader) -> Result<Vec<RecordView<'a>>, BatchError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let trunc = || bad("records end early");
    for _ in 0..h.records_count.max(0) {
        let start = pos;
        let len = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        let len = usize::try_from(len).map_err(|_| bad("negative record length"))?;
        let end = pos
            .checked_add(len)
            .filter(|&e| e <= section.len())
            .ok_or_else(trunc)?;
        let attributes = *section.get(pos).ok_or_else(trunc)?;
        pos += 1;
        let ts_delta = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        let offset_delta = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        let body_from = pos - start;
        let key_len = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        let key = match key_len {
            -1 => None,
            n if n >= 0 && pos <= end && (n as u64) <= (end - pos) as u64 => {
                let k = &section[pos..pos + n as usize];
                pos += n as usize;
                Some(k)
            }
            n => return Err(bad(format!("record key length {n}"))),
        };
        let value_len = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        if pos > end {
            return Err(trunc());
        }
        let value = match value_len {
            n if n < 0 => None,
            n if (n as u64) <= (end - pos) as u64 => Some(&section[pos..pos + n as usize]),
            n => return Err(bad(format!("record value length {n}"))),
        };
        out.push(RecordView {
            offset_delta: i32::try_from(offset_delta).map_err(|_| bad("offset delta"))?,
            timestamp_ms: h.base_timestamp.saturating_add(ts_delta),
            key,
            tombstone: value_len < 0,
            value,
            raw: &section[start..end],
            body_from,
            attributes,
        });
        pos = end;
    }
    Ok(out)
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
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

/// Batch `b` (header `h`) holding only `kept`, in order. `new_horizon_ms` sets a delete
/// horizon on a batch that has none. A snappy batch keeps its framing (xerial or raw); an
/// emptied batch (kept for its producer's sequence) is uncompressed.
pub fn rebuild(
    b: &[u8],
    h: &BatchHeader,
    kept: &[RecordView<'_>],
    new_horizon_ms: Option<i64>,
) -> Result<Vec<u8>, BatchError> {
    let base_ts = new_horizon_ms.unwrap_or(h.base_timestamp);
    let mut records = Vec::with_capacity(kept.iter().map(|r| r.raw.len() + 8).sum());
    let mut body = Vec::new();
    for r in kept {
        if new_horizon_ms.is_none() {
            records.extend_from_slice(r.raw);
            continue;
        }
        // The record's fields before the key, re-based on the new base timestamp.
        body.clear();
        body.push(r.attributes);
        put_varlong(&mut body, r.timestamp_ms.wrapping_sub(base_ts));
        put_varlong(&mut body, r.offset_delta as i64);
        body.extend_from_slice(&r.raw[r.body_from..]);
        put_varlong(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
    }
    let mut head = b[..HEADER_BYTES].to_vec();
    let mut attrs = h.attributes;
    if new_horizon_ms.is_some() {
        attrs |= DELETE_HORIZON_FLAG;
    }
    let max_ts = if h.is_log_append_time() {
        h.max_timestamp
    } else {
        kept.iter()
            .map(|r| r.timestamp_ms)
            .max()
            .unwrap_or(h.max_timestamp)
    };
    head[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attrs.to_be_bytes());
    head[BASE_TIMESTAMP_POS..BASE_TIMESTAMP_POS + 8].copy_from_slice(&base_ts.to_be_bytes());
    head[MAX_TIMESTAMP_POS..MAX_TIMESTAMP_POS + 8].copy_from_slice(&max_ts.to_be_bytes());
    head[RECORDS_COUNT_POS..RECORDS_COUNT_POS + 4]
        .copy_from_slice(&(kept.len() as i32).to_be_bytes());
    // An emptied batch is written uncompressed, as Kafka does: an empty compressed section
    // is not something every client decodes (librdkafka asserts on it).
    let codec = if kept.is_empty() { 0 } else { h.compression() };
    let section = match codec {
        0 => records,
        c => {
            let xerial = compression::is_xerial_snappy(&b[HEADER_BYTES..]);
            compression::compress(c, &records, xerial)
                .map_err(|e| bad(format!("codec {c}: {e}")))?
        }
    };
    Ok(batch::with_records_section(&head, codec, &section))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch_encode::{encode_uncompressed, NewRecord};
    use bytes::Bytes;

    fn sample() -> Vec<u8> {
        let mut b = encode_uncompressed((0..6).map(|i| NewRecord {
            key: Some(Bytes::from(format!("k{}", i % 3))),
            value: (i != 4).then(|| Bytes::from(format!("v{i}"))),
            timestamp_ms: 1_000 + i,
            ..Default::default()
        }));
        batch::set_base_offset(&mut b, 100);
        b
    }

    #[test]
    fn filtered_batch_keeps_offsets_timestamps_and_codec() {
        for codec in 0..=4i16 {
            let plain = sample();
            let b = if codec == 0 {
                plain.clone()
            } else {
                let c = compression::compress(codec, &plain[HEADER_BYTES..], false).unwrap();
                batch::with_records_section(&plain, codec, &c)
            };
            let h = batch::validate(&b).unwrap();
            let sec = section(&b, &h).unwrap();
            let recs = parse(&sec, &h).unwrap();
            assert_eq!(recs.len(), 6);
            assert!(recs[4].tombstone && !recs[3].tombstone);
            let empty = rebuild(&b, &h, &[], None).unwrap();
            let eh = batch::validate_stored(&empty).unwrap();
            assert_eq!(
                (eh.compression(), eh.records_count, eh.last_offset_delta),
                (0, 0, 5)
            );
            let kept: Vec<_> = recs
                .iter()
                .copied()
                .filter(|r| r.offset_delta >= 3)
                .collect();
            for horizon in [None, Some(99_999)] {
                let out = rebuild(&b, &h, &kept, horizon).unwrap();
                let oh = batch::parse_header(&out).unwrap();
                assert_eq!(oh.size_bytes, out.len());
                assert_eq!(
                    batch::compute_crc(&out),
                    u32::from_be_bytes(out[17..21].try_into().unwrap())
                );
                assert_eq!(
                    (oh.base_offset, oh.last_offset_delta, oh.records_count),
                    (100, 5, 3)
                );
                assert_eq!(oh.compression(), codec);
                assert_eq!(delete_horizon_ms(&oh), horizon);
                assert_eq!(oh.max_timestamp, 1_005);
                let osec = section(&out, &oh).unwrap();
                let again = parse(&osec, &oh).unwrap();
                let got: Vec<_> = again
                    .iter()
                    .map(|r| (r.offset_delta, r.timestamp_ms, r.key, r.tombstone))
                    .collect();
                let want: Vec<_> = kept
                    .iter()
                    .map(|r| (r.offset_delta, r.timestamp_ms, r.key, r.tombstone))
                    .collect();
                assert_eq!(got, want, "codec {codec} horizon {horizon:?}");
            }
        }
    }
}
