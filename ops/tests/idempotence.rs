//! Idempotent producers never get an acknowledgement for a batch the partition does not hold
//! (issue #20's sequence): sequence 0 stored; sequence 1 too large for the topic
//! (`max.message.bytes=2000`) refused with MESSAGE_TOO_LARGE; sequence 1 again, small, stored
//! at offset 1 and readable there; a retry of it answered with offset 1 and not stored twice.
//! Then the same promise through confluent-kafka's idempotent producer.

mod support;

use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;
use engine::batch_encode::{encode_for_producer, NewRecord, ProducerSeq};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    FetchRequest, FetchResponse, InitProducerIdRequest, InitProducerIdResponse, ProduceResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use support::wire::{call, produce_req};
use support::*;

const MESSAGE_TOO_LARGE: i16 = 10;

fn batch(pid: i64, epoch: i16, seq: i32, value_len: usize) -> Bytes {
    let record = NewRecord {
        value: Some(Bytes::from(vec![b'v'; value_len])),
        timestamp_ms: 1,
        ..Default::default()
    };
    let producer = ProducerSeq {
        producer_id: pid,
        epoch,
        base_sequence: seq,
    };
    Bytes::from(encode_for_producer([record], Some(producer)))
}

/// Base offsets and value lengths of every record stored in `topic`/0.
fn stored(s: &mut TcpStream, topic: &str) -> Vec<(i64, usize)> {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = call(s, 1, 11, 99, &req);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut records = p.records.clone().unwrap_or_default();
    let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut records).unwrap();
    sets.iter()
        .flat_map(|set| set.records.iter())
        .map(|r| (r.offset, r.value.as_ref().map_or(0, |v| v.len())))
        .collect()
}

#[test]
fn a_refused_batch_leaves_its_sequence_free_raw_protocol() {
    let mut broker = Broker::start(1);
    create_topic(&broker, "seq", 1, &[("max.message.bytes", "2000")]);
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let init: InitProducerIdResponse = call(
        &mut s,
        22,
        0,
        1,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
    );
    assert_eq!(init.error_code, 0);
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let mut produce = |corr: i32, records: Bytes| -> (i16, i64) {
        let r: ProduceResponse = call(&mut s, 0, 7, corr, &produce_req("seq", 0, records));
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    };
    assert_eq!(produce(2, batch(pid, epoch, 0, 10)), (0, 0));
    let (code, _) = produce(3, batch(pid, epoch, 1, 5_000));
    assert_eq!(code, MESSAGE_TOO_LARGE);
    assert_eq!(
        produce(4, batch(pid, epoch, 1, 10)),
        (0, 1),
        "sequence 1 is stored"
    );
    assert_eq!(
        produce(5, batch(pid, epoch, 1, 10)),
        (0, 1),
        "a retry gets the original"
    );
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(
        stored(&mut s, "seq"),
        vec![(0, 10), (1, 10)],
        "the partition holds exactly what was acknowledged"
    );
    broker.assert_alive();
    broker.terminate();
}

#[test]
fn confluent_idempotent_producer_acknowledges_only_stored_records() {
    let mut broker = Broker::start(2);
    create_topic(&broker, "idem", 1, &[("max.message.bytes", "2000")]);
    let out = run_python(
        "idempotent_producer.py",
        &[&broker.bootstrap(), "idem", "300"],
        &[],
        Duration::from_secs(120),
    );
    let summary = out.lines().last().unwrap_or("");
    assert!(
        summary.contains("\"ok\": true"),
        "idempotent_producer.py:\n{out}"
    );
    eprintln!("idempotent_producer.py: {summary}");
    broker.assert_alive();
    broker.terminate();
}
