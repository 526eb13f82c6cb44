//! DeleteRecords (issue #12) against `ringlog serve` on two cores: the Java client's
//! `Admin.deleteRecords` (low watermarks returned, a consumer below the log start is refused
//! or reset, `listOffsets(earliest)` follows, a SIGKILL restart keeps it), and the refusals at
//! the wire level (past the high watermark, a negative offset, an internal topic, an unknown
//! partition).

mod support;

use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{
    create_topics_request::CreatableTopic, CreateTopicsRequest, CreateTopicsResponse,
    DeleteRecordsRequest, DeleteRecordsResponse, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use support::wire::{call, produce_req};
use support::*;

const DELETE_RECORDS_KEY: i16 = 21;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const POLICY_VIOLATION: i16 = 44;

#[test]
fn java_admin_delete_records_moves_the_log_start_durably() {
    let check = support::java::JavaCheck::compile("DeleteRecordsCheck");
    let mut broker = Broker::start(2);
    eprintln!("{}", check.run(&[&broker.bootstrap(), "deleted", "delete"]));
    broker.kill();
    broker.restart();
    eprintln!("{}", check.run(&[&broker.bootstrap(), "deleted", "verify"]));
    broker.assert_alive();
    broker.terminate();
}

fn connect(broker: &Broker) -> TcpStream {
    let s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn delete_req(topic: &str, partition: i32, offset: i64) -> DeleteRecordsRequest {
    DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])])
}

#[test]
fn delete_records_refusals_at_the_wire() {
    let mut broker = Broker::start(2);
    let mut s = connect(&broker);
    let r: CreateTopicsResponse = call(
        &mut s,
        19,
        5,
        1,
        &CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name("dr"))
                .with_num_partitions(1)
                .with_replication_factor(1)]),
    );
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");
    let records = Bytes::from(engine::batch_encode::encode_uncompressed((0..5).map(|i| {
        engine::batch_encode::NewRecord {
            value: Some(Bytes::from(format!("v{i}"))),
            timestamp_ms: 1,
            ..Default::default()
        }
    })));
    let r: ProduceResponse = call(&mut s, 0, 9, 2, &produce_req("dr", 0, records));
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0, "{r:?}");

    let mut corr = 10;
    let mut ask = |topic: &str, partition: i32, offset: i64| -> (i16, i64) {
        corr += 1;
        let r: DeleteRecordsResponse = call(
            &mut s,
            DELETE_RECORDS_KEY,
            2,
            corr,
            &delete_req(topic, partition, offset),
        );
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.partition_index, partition);
        (p.error_code, p.low_watermark)
    };
    assert_eq!(
        ask("dr", 0, 6).0,
        OFFSET_OUT_OF_RANGE,
        "past the high watermark"
    );
    assert_eq!(
        ask("dr", 0, -2).0,
        OFFSET_OUT_OF_RANGE,
        "a negative offset but -1"
    );
    assert_eq!(ask("__consumer_offsets", 0, 0).0, POLICY_VIOLATION);
    assert_eq!(ask("dr", 7, 1).0, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(ask("nope", 0, 1).0, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(ask("dr", 0, 2), (0, 2));
    assert_eq!(ask("dr", 0, 1), (0, 2), "moving back is a no-op");
    assert_eq!(ask("dr", 0, -1), (0, 5), "-1 is the high watermark");
    broker.assert_alive();
    broker.terminate();
}
