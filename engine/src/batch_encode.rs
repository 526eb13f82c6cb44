//! Building uncompressed Kafka RecordBatch v2 bytes (with the `kafka-protocol` crate's encoder)
//! for everything that writes records itself: the broker's `__consumer_offsets`, fan-out child
//! batches, `ringlog produce`, transactional batches (tests, transactional offset commits),
//! benchmarks and tests.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One record to encode. A `None` value is a tombstone.
#[derive(Debug, Clone, Default)]
pub struct NewRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: IndexMap<StrBytes, Option<Bytes>>,
    pub timestamp_ms: i64,
}

impl NewRecord {
    /// This record as `kafka-protocol` encodes it: a data record of no producer (sequence -1)
    /// at offset 0, its timestamp a creation time.
    pub fn into_record(self) -> Record {
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: self.timestamp_ms,
            key: self.key,
            value: self.value,
            headers: self.headers,
        }
    }
}

/// An idempotent producer's identity and the sequence of a batch's first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSeq {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

/// One uncompressed v2 batch of `records`, in order, with no producer id (base sequence -1);
/// offsets start at 0 (the log assigns the base offset on append).
pub fn encode_uncompressed(records: impl IntoIterator<Item = NewRecord>) -> Vec<u8> {
    encode_for_producer(records, None)
}

/// `encode_uncompressed` as idempotent producer `producer` writes it (tests of sequence
/// checks); `None` is a non-idempotent batch.
pub fn encode_for_producer(
    records: impl IntoIterator<Item = NewRecord>,
    producer: Option<ProducerSeq>,
) -> Vec<u8> {
    encode(records, producer, false)
}

/// `encode_for_producer` for a transactional producer: the batch's transactional attribute
/// is set (a data batch of the producer's open transaction; markers are
/// `txn::encode_marker`).
pub fn encode_transactional(
    records: impl IntoIterator<Item = NewRecord>,
    producer: ProducerSeq,
) -> Vec<u8> {
    encode(records, Some(producer), true)
}

fn encode(
    records: impl IntoIterator<Item = NewRecord>,
    producer: Option<ProducerSeq>,
    transactional: bool,
) -> Vec<u8> {
    let (producer_id, producer_epoch, base_sequence) =
        producer.map_or((-1, -1, -1), |p| (p.producer_id, p.epoch, p.base_sequence));
    let recs: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional,
            producer_id,
            producer_epoch,
            offset: i as i64,
            // The encoder keeps records in one batch while offset - sequence is constant, and
            // writes base sequence = first sequence: -1 (none) for a non-idempotent producer.
            sequence: if base_sequence < 0 {
                i as i32 - 1
            } else {
                base_sequence + i as i32
            },
            ..r.into_record()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_valid_batch_in_order() {
        let b = encode_uncompressed((0..5).map(|i| NewRecord {
            key: Some(Bytes::from(format!("k{i}"))),
            value: (i != 3).then(|| Bytes::from(format!("v{i}"))),
            timestamp_ms: 100 + i,
            ..Default::default()
        }));
        let h = crate::batch::validate(&b).expect("one valid v2 batch");
        assert_eq!(
            (h.records_count, h.base_sequence, h.producer_id),
            (5, -1, -1)
        );
        assert_eq!((h.base_timestamp, h.max_timestamp), (100, 104));
    }
}
