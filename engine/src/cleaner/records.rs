//! The records of one stored batch as the cleaner sees them, and the batch rebuilt from the
//! records it keeps: same base offset, last offset delta, producer fields and codec (Kafka's
//! `MemoryRecords.filterTo`), so offsets and producer sequences stay as they were.
//!
//! A batch that keeps a tombstone gets a delete horizon (KIP-534): attribute bit 6 set and the
//! base timestamp replaced by the time after which its tombstones may go; record timestamp
//! deltas are re-based so every record keeps its timestamp.

use crate::batch::records::{bad, RecordView};
use crate::batch::{
    self, put_varlong, BatchError, BatchHeader, ATTRIBUTES_POS, BASE_TIMESTAMP_POS, HEADER_BYTES,
    MAX_TIMESTAMP_POS, RECORDS_COUNT_POS,
};
use crate::compression;

/// Attribute bit of a batch whose base timestamp is its delete horizon (KIP-534).
pub const DELETE_HORIZON_FLAG: i16 = 0x40;

/// The delete horizon of a batch, if the cleaner set one.
pub fn delete_horizon_ms(h: &BatchHeader) -> Option<i64> {
    (h.attributes & DELETE_HORIZON_FLAG != 0).then_some(h.base_timestamp)
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
    use crate::batch::records::{parse, section};
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
