//! Building Kafka record batches for the broker's own writes (`__consumer_offsets`) and the
//! admin tools, with the `kafka-protocol` crate's encoder.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One uncompressed v2 batch of `(key, value)` records (a `None` value is a tombstone), no
/// producer id, every record stamped `timestamp_ms`.
pub fn encode_batch(records: &[(Option<Bytes>, Option<Bytes>)], timestamp_ms: i64) -> Vec<u8> {
    let recs: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch while offset - sequence is constant, and
            // writes base sequence = first sequence: -1 (none) for a non-idempotent producer.
            sequence: i as i32 - 1,
            timestamp: timestamp_ms,
            key: k.clone(),
            value: v.clone(),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        recs.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encoding an uncompressed batch of valid records cannot fail");
    buf.to_vec()
}
