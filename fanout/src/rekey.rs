//! Re-keying: parent batches are decoded (any codec, through the engine's pure-Rust
//! decompressors), each record's child partition is picked with Kafka's default partitioner
//! (`murmur2(key) & 0x7fffffff % partitions`; null keys round-robin), and each child partition
//! gets one uncompressed v2 batch holding its records in parent order. Keys, values, headers and
//! record timestamps are preserved.

use bytes::{Buf, Bytes};
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`), KFC-4's.
pub use kfc4::murmur2;

/// The child partition of a record: keyed records by murmur2 like Kafka's default partitioner,
/// null keys round-robin through `round_robin` (advanced on each use).
pub fn child_partition(key: Option<&[u8]>, partitions: u32, round_robin: &mut u32) -> u32 {
    assert!(partitions > 0, "a topic has at least one partition");
    match key {
        Some(k) => ((murmur2(k) as u32) & 0x7fff_ffff) % partitions,
        None => {
            let p = *round_robin % partitions;
            *round_robin = round_robin.wrapping_add(1);
            p
        }
    }
}

/// Decodes stored parent batches (as `PartitionLog::read` returns them) and keeps the data
/// records at offsets `>= from` (the first batch may start before the cursor), in offset order.
/// Control records (transaction markers) are left out.
pub fn decode_parent(bytes: &[u8], from: u64) -> Result<Vec<Record>, String> {
    let mut buf = Bytes::copy_from_slice(bytes);
    let mut out = Vec::new();
    while buf.has_remaining() {
        let set = RecordBatchDecoder::decode_with_custom_compression(
            &mut buf,
            Some(|data: &mut Bytes, c: Compression| {
                if c == Compression::None {
                    return Ok(data.clone());
                }
                engine::compression::decompress(c as i16, data)
                    .map(Bytes::from)
                    .map_err(|e| std::io::Error::other(e).into())
            }),
        )
        .map_err(|e| format!("decoding a parent batch: {e}"))?;
        out.extend(
            set.records
                .into_iter()
                .filter(|r| !r.control && r.offset >= 0 && r.offset as u64 >= from),
        );
    }
    Ok(out)
}

/// One uncompressed v2 batch of `records` (already in order) for a child partition, offsets and
/// producer fields reset (the child log assigns offsets), timestamps, keys, values and headers
/// kept.
pub fn encode_child_batch(records: &[&Record]) -> Vec<u8> {
    engine::batch_encode::encode_uncompressed(records.iter().map(|r| {
        engine::batch_encode::NewRecord {
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r.headers.clone(),
            timestamp_ms: r.timestamp,
        }
    }))
}

/// Splits decoded parent records by child partition: `(child partition, batch)` for every child
/// partition that gets records, ascending by partition; each batch keeps parent order (so
/// per-key order holds).
/// Upper estimate of a record's encoded size (varint headers included).
fn approx_record_bytes(r: &Record) -> usize {
    const RECORD_OVERHEAD_BYTES: usize = 32;
    r.key.as_ref().map_or(0, |k| k.len())
        + r.value.as_ref().map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()) + 8)
            .sum::<usize>()
        + RECORD_OVERHEAD_BYTES
}

/// The slab's records grouped by child partition, each group cut into batches of at most
/// `crate::MAX_CHILD_BATCH_BYTES` (a single larger record goes alone), in parent order.
pub fn rekey(
    records: &[Record],
    child_partitions: u32,
    round_robin: &mut u32,
) -> Vec<(u32, Vec<Vec<u8>>)> {
    let mut by_part: std::collections::BTreeMap<u32, Vec<&Record>> = Default::default();
    for r in records {
        let p = child_partition(r.key.as_deref(), child_partitions, round_robin);
        by_part.entry(p).or_default().push(r);
    }
    by_part
        .into_iter()
        .map(|(p, rs)| {
            let mut batches = Vec::new();
            let mut start = 0;
            let mut bytes = 0;
            for (i, r) in rs.iter().enumerate() {
                let n = approx_record_bytes(r);
                if i > start && bytes + n > crate::MAX_CHILD_BATCH_BYTES {
                    batches.push(encode_child_batch(&rs[start..i]));
                    start = i;
                    bytes = 0;
                }
                bytes += n;
            }
            batches.push(encode_child_batch(&rs[start..]));
            (p, batches)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn null_keys_round_robin() {
        let mut rr = 0;
        let got: Vec<u32> = (0..5).map(|_| child_partition(None, 3, &mut rr)).collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1]);
        let mut rr = 0;
        let k = child_partition(Some(b"foobar"), 7, &mut rr);
        assert_eq!(k, ((-790332482i32 as u32) & 0x7fff_ffff) % 7);
        assert_eq!(rr, 0);
    }

    fn rec(key: Option<&str>, value: &str, ts: i64) -> Record {
        engine::batch_encode::NewRecord {
            key: key.map(|k| Bytes::from(k.to_string())),
            value: Some(Bytes::from(value.to_string())),
            headers: [(
                StrBytes::from_static_str("h"),
                Some(Bytes::from(value.to_string())),
            )]
            .into_iter()
            .collect(),
            timestamp_ms: ts,
        }
        .into_record()
    }

    /// One uncompressed parent batch of `recs`, its offsets from `base`.
    fn parent_bytes(recs: &[Record], base: i64) -> Vec<u8> {
        let mut bytes = encode_child_batch(&recs.iter().collect::<Vec<_>>());
        engine::batch::set_base_offset(&mut bytes, base);
        bytes
    }

    #[test]
    fn decode_skips_below_cursor_and_rekey_keeps_everything() {
        let recs: Vec<Record> = (0..20)
            .map(|i| {
                let k = format!("k{}", i % 4);
                rec(
                    if i % 5 == 0 { None } else { Some(k.as_str()) },
                    &format!("v{i}"),
                    1000 + i,
                )
            })
            .collect();
        // Two parent batches. (Compressed batches go through engine::compression::decompress,
        // tested in the engine; kafka-protocol's own compressors are not enabled here.)
        let mut bytes = parent_bytes(&recs[..10], 100);
        bytes.extend(parent_bytes(&recs[10..], 110));
        let got = decode_parent(&bytes, 103).unwrap();
        assert_eq!(got.len(), 17);
        assert_eq!(got[0].offset, 103);
        assert_eq!(got[0].value.as_deref(), Some(&b"v3"[..]));

        let mut rr = 0;
        let batches = rekey(&got, 3, &mut rr);
        let mut total = 0;
        for (p, bs) in &batches {
            assert_eq!(
                bs.len(),
                1,
                "small slabs make one batch per child partition"
            );
            let mut buf = Bytes::from(bs[0].clone());
            let sets = RecordBatchDecoder::decode_all(&mut buf).unwrap();
            assert_eq!(sets.len(), 1, "one batch per child partition");
            let mut last_value_per_key = std::collections::HashMap::new();
            for r in &sets[0].records {
                total += 1;
                if let Some(k) = &r.key {
                    let mut dummy = 0;
                    assert_eq!(child_partition(Some(k), 3, &mut dummy), *p);
                    // Per-key order: values increase within a key.
                    let v: i64 = std::str::from_utf8(&r.value.as_ref().unwrap()[1..])
                        .unwrap()
                        .parse()
                        .unwrap();
                    let prev = last_value_per_key.insert(k.clone(), v);
                    assert!(prev.is_none_or(|p| p < v));
                    assert_eq!(r.timestamp, 1000 + v);
                }
                assert_eq!(
                    r.headers
                        .get(&StrBytes::from_static_str("h"))
                        .cloned()
                        .flatten(),
                    r.value
                );
            }
        }
        assert_eq!(total, 17);
        // Three null keys (offsets 105, 110, 115) went round-robin.
        assert_eq!(rr, 3);
    }

    #[test]
    fn large_slabs_are_cut_into_bounded_batches_in_order() {
        let big = "x".repeat(100 * 1024);
        let recs: Vec<Record> = (0..20)
            .map(|i| rec(Some("same-key"), &format!("{i:02}{big}"), 1000 + i))
            .collect();
        let mut rr = 0;
        let batches = rekey(&recs, 4, &mut rr);
        assert_eq!(batches.len(), 1, "one key, one child partition");
        let (_, bs) = &batches[0];
        assert!(
            bs.len() >= 4,
            "20 × 100 KiB cut into ≤ 512 KiB batches: {}",
            bs.len()
        );
        let mut seen = Vec::new();
        for b in bs {
            assert!(
                b.len() <= crate::MAX_CHILD_BATCH_BYTES + 4096,
                "batch of {} bytes",
                b.len()
            );
            engine::batch::validate(b).expect("valid v2 batch");
            let mut buf = Bytes::from(b.clone());
            for r in &RecordBatchDecoder::decode_all(&mut buf).unwrap()[0].records {
                seen.push(String::from_utf8_lossy(&r.value.as_ref().unwrap()[..2]).into_owned());
            }
        }
        let want: Vec<String> = (0..20).map(|i| format!("{i:02}")).collect();
        assert_eq!(seen, want, "parent order kept across the batches");
    }
}
