//! The raw Kafka protocol for tests that craft requests byte by byte: size-prefixed frames,
//! one request and its decoded response.

use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

/// Encodes `header + body` as one size-prefixed frame.
pub fn frame<R: Encodable + HeaderVersion>(
    api_key: i16,
    version: i16,
    corr: i32,
    req: &R,
) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key)
        .with_request_api_version(version)
        .with_correlation_id(corr)
        .with_client_id(Some(StrBytes::from_static_str("ringlog-e2e")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, R::header_version(version))
        .expect("encode header");
    req.encode(&mut buf, version).expect("encode request");
    let mut out = (buf.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

/// Reads one response frame (size-prefixed). Panics on close or time-out.
pub fn read_frame(s: &mut TcpStream, what: &str) -> Bytes {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)
        .unwrap_or_else(|e| panic!("{what}: reading the response size: {e}"));
    let len = i32::from_be_bytes(len);
    assert!((0..64 << 20).contains(&len), "{what}: response size {len}");
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body)
        .unwrap_or_else(|e| panic!("{what}: reading a {len}-byte response: {e}"));
    Bytes::from(body)
}

/// Sends a request and decodes its response (header version from the response type).
pub fn call<Req, Resp>(s: &mut TcpStream, api_key: i16, version: i16, corr: i32, req: &Req) -> Resp
where
    Req: Encodable + HeaderVersion,
    Resp: Decodable + HeaderVersion,
{
    s.write_all(&frame(api_key, version, corr, req)).unwrap();
    let what = format!("api {api_key} v{version}");
    let mut body = read_frame(s, &what);
    let h = ResponseHeader::decode(&mut body, Resp::header_version(version))
        .unwrap_or_else(|e| panic!("{what}: response header: {e}"));
    assert_eq!(h.correlation_id, corr, "{what}: correlation id");
    let resp = Resp::decode(&mut body, version)
        .unwrap_or_else(|e| panic!("{what}: decoding the response: {e}"));
    assert_eq!(
        body.remaining(),
        0,
        "{what}: {} trailing bytes in response",
        body.remaining()
    );
    resp
}

/// An acks=all Produce of one batch to one partition.
pub fn produce_req(
    topic: &str,
    partition: i32,
    records: Bytes,
) -> kafka_protocol::messages::ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    kafka_protocol::messages::ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(
                topic.to_string(),
            )))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}
