//! A small blocking Kafka client for the admin commands: one TCP connection, one request at a
//! time, messages encoded and decoded with the `kafka-protocol` crate.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// How long a command waits for the broker to answer one request.
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;
/// Largest response frame accepted.
pub const MAX_RESPONSE_BYTES: usize = 256 << 20;

pub struct KafkaClient {
    addr: String,
    stream: TcpStream,
    correlation_id: i32,
}

impl KafkaClient {
    pub fn connect(addr: &str) -> Result<Self, String> {
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve broker address {addr:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("broker address {addr:?} resolves to nothing"))?;
        let stream = TcpStream::connect_timeout(&sock, Duration::from_millis(REQUEST_TIMEOUT_MS))
            .map_err(|e| format!("cannot connect to broker {addr}: {e} (is `ringlog serve` running? use --brokers HOST:PORT)"))?;
        stream
            .set_read_timeout(Some(Duration::from_millis(REQUEST_TIMEOUT_MS)))
            .map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        Ok(Self {
            addr: addr.to_string(),
            stream,
            correlation_id: 0,
        })
    }

    /// Sends `req` at `version` and returns the decoded response.
    pub fn call<R: Request>(&mut self, req: &R, version: i16) -> Result<R::Response, String> {
        self.correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("ringlog-cli")));
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[0u8; 4]);
        header
            .encode(&mut buf, R::header_version(version))
            .and_then(|_| req.encode(&mut buf, version))
            .map_err(|e| format!("encoding request: {e}"))?;
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.stream
            .write_all(&buf)
            .map_err(|e| format!("sending to {}: {e}", self.addr))?;
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .map_err(|e| format!("reading from {}: {e}", self.addr))?;
        let size = i32::from_be_bytes(size);
        if size < 4 || size as usize > MAX_RESPONSE_BYTES {
            return Err(format!("broker {} sent a frame of {size} bytes", self.addr));
        }
        let mut body = vec![0u8; size as usize];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| format!("reading from {}: {e}", self.addr))?;
        let mut body = Bytes::from(body);
        let resp_header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| format!("decoding response header: {e}"))?;
        if resp_header.correlation_id != self.correlation_id {
            return Err(format!(
                "broker answered correlation id {} to request {}",
                resp_header.correlation_id, self.correlation_id
            ));
        }
        R::Response::decode(&mut body, version).map_err(|e| format!("decoding response: {e}"))
    }
}

/// Kafka's name for an error code, for messages.
pub fn error_name(code: i16) -> String {
    let name = match code {
        0 => "NONE",
        1 => "OFFSET_OUT_OF_RANGE",
        3 => "UNKNOWN_TOPIC_OR_PARTITION",
        15 => "COORDINATOR_NOT_AVAILABLE",
        16 => "NOT_COORDINATOR",
        22 => "ILLEGAL_GENERATION",
        24 => "INVALID_GROUP_ID",
        25 => "UNKNOWN_MEMBER_ID",
        27 => "REBALANCE_IN_PROGRESS",
        36 => "TOPIC_ALREADY_EXISTS",
        37 => "INVALID_PARTITIONS",
        40 => "INVALID_CONFIG",
        68 => "NON_EMPTY_GROUP",
        69 => "GROUP_ID_NOT_FOUND",
        _ => return format!("error code {code}"),
    };
    format!("{name} ({code})")
}
