//! The newest versions ringlog serves (kafka-protocol 0.18's): Produce 13 names topics by ID;
//! ListOffsets 7–10 answer max timestamp (-3), earliest local (-4) and latest tiered (-5).

mod support;

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    metadata_request::MetadataRequestTopic, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::net::TcpStream;
use std::time::Duration;
use support::wire::call;
use support::*;

fn batch(timestamps: &[i64]) -> Bytes {
    Bytes::from(engine::batch_encode::encode_uncompressed(
        timestamps
            .iter()
            .map(|&ts| engine::batch_encode::NewRecord {
                value: Some(Bytes::from_static(b"v")),
                timestamp_ms: ts,
                ..Default::default()
            }),
    ))
}

#[test]
fn topic_ids_and_timestamp_lookups_of_the_newest_versions() {
    let broker = Broker::start(1);
    create_topic(&broker, "v", 1, &[]);
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let name = || TopicName(StrBytes::from_static_str("v"));
    let meta: MetadataResponse = call(
        &mut s,
        3,
        12,
        1,
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name()))
        ])),
    );
    let topic_id = meta.topics[0].topic_id;
    assert!(!topic_id.is_nil());

    // Produce v13 by topic ID: two batches, the largest timestamp in the middle of the first.
    let mut produce = |corr: i32, id, records: Bytes| -> (i16, i64) {
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_topic_id(id)
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records))])]);
        let r: ProduceResponse = call(&mut s, 0, 13, corr, &req);
        assert_eq!(r.responses[0].topic_id, id);
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    };
    assert_eq!(produce(2, topic_id, batch(&[1_000, 9_000, 2_000])), (0, 0));
    assert_eq!(produce(3, topic_id, batch(&[3_000, 4_000])), (0, 3));
    let (code, _) = produce(4, uuid::Uuid::from_u128(42), batch(&[5]));
    assert_eq!(code, 100, "UNKNOWN_TOPIC_ID");

    // ListOffsets v10: -3 → offset 1 at 9000; -4 → 0; -5 → -1; -1 → 5.
    let lookup = |s: &mut TcpStream, corr: i32, ts: i64| -> (i16, i64, i64) {
        let req = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name())
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(ts)])]);
        let r: ListOffsetsResponse = call(s, 2, 10, corr, &req);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp)
    };
    assert_eq!(lookup(&mut s, 10, -3), (0, 1, 9_000));
    assert_eq!(lookup(&mut s, 11, -4).1, 0);
    assert_eq!(lookup(&mut s, 12, -5).1, -1);
    assert_eq!(lookup(&mut s, 13, -1).1, 5);
}
