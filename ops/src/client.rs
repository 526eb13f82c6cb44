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
        self.send_only(req, version)?;
        let mut body = Bytes::from(self.read_frame()?);
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

    /// Sends a request frame `encode` makes (size prefix included) with the next
    /// correlation id, and returns the response frame (after its size) with that id: for
    /// APIs the kafka-protocol crate has no schema for (the barrier APIs).
    pub fn call_frame(
        &mut self,
        encode: impl FnOnce(i32) -> Vec<u8>,
    ) -> Result<(i32, Vec<u8>), String> {
        self.correlation_id += 1;
        let frame = encode(self.correlation_id);
        self.stream
            .write_all(&frame)
            .map_err(|e| format!("sending to {}: {e}", self.addr))?;
        Ok((self.correlation_id, self.read_frame()?))
    }

    /// One response frame's bytes (after the size).
    fn read_frame(&mut self) -> Result<Vec<u8>, String> {
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
        Ok(body)
    }
}

/// The API version ranges a broker advertises (ApiVersions), for picking request versions.
#[derive(Clone)]
pub struct BrokerVersions {
    /// api key → (min, max).
    pub ranges: std::collections::BTreeMap<i16, (i16, i16)>,
}

impl BrokerVersions {
    /// The highest version of `key` that both this tool (`ours_max`, at least `ours_min`) and
    /// the broker speak, or an error naming the API and both ranges.
    pub fn pick(
        &self,
        key: kafka_protocol::messages::ApiKey,
        ours_min: i16,
        ours_max: i16,
    ) -> Result<i16, String> {
        let Some(&(min, max)) = self.ranges.get(&(key as i16)) else {
            return Err(format!("the broker does not support the {key:?} API"));
        };
        let v = max.min(ours_max);
        if v < min.max(ours_min) {
            return Err(format!(
                "no common version of {key:?}: broker {min}..={max}, ringlog {ours_min}..={ours_max}"
            ));
        }
        Ok(v)
    }
}

impl KafkaClient {
    /// Asks the broker which API versions it supports (ApiVersions v3, falling back to v0 when
    /// the broker answers UNSUPPORTED_VERSION).
    pub fn api_versions(&mut self) -> Result<BrokerVersions, String> {
        use kafka_protocol::messages::ApiVersionsRequest;
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("ringlog-cli"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut r = self.call(&req, 3)?;
        if r.error_code == kafka_protocol::ResponseError::UnsupportedVersion.code() {
            r = self.call(&ApiVersionsRequest::default(), 0)?;
        }
        if r.error_code != 0 {
            return Err(format!("ApiVersions failed: {}", kafka_error(r.error_code)));
        }
        Ok(BrokerVersions {
            ranges: r
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect(),
        })
    }

    /// Sends `req` at `version` without waiting for an answer (Produce with acks=0).
    pub fn send_only<R: Request>(&mut self, req: &R, version: i16) -> Result<(), String> {
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
            .map_err(|e| format!("sending to {}: {e}", self.addr))
    }
}

/// `Err("{what}: NAME (code): message")` when `code` is an error (`what` says what was
/// refused: "cannot delete topic t"), else `Ok(())`.
pub fn check(
    code: i16,
    message: Option<&StrBytes>,
    what: impl FnOnce() -> String,
) -> Result<(), String> {
    if code == 0 {
        return Ok(());
    }
    Err(format!("{}: {}", what(), refusal(code, message)))
}

/// The first result of a response that answers for one resource, or an error naming `api`.
pub fn first<T>(results: Vec<T>, api: &str) -> Result<T, String> {
    results
        .into_iter()
        .next()
        .ok_or_else(|| format!("{api} returned no result"))
}

/// "NAME (code): message" for a refusal.
pub fn refusal(code: i16, msg: Option<&StrBytes>) -> String {
    match msg {
        Some(m) if !m.is_empty() => format!("{}: {}", kafka_error(code), m),
        _ => kafka_error(code),
    }
}

/// Kafka's name for any error code, with the code: `TOPIC_ALREADY_EXISTS (36)`.
pub fn kafka_error(code: i16) -> String {
    match kafka_protocol::error::ResponseError::try_from_code(code) {
        None => "NONE (0)".to_string(),
        Some(kafka_protocol::error::ResponseError::Unknown(c)) => format!("error code {c}"),
        Some(e) => format!("{} ({code})", screaming(&format!("{e:?}"))),
    }
}

/// `TopicAlreadyExists` → `TOPIC_ALREADY_EXISTS`.
fn screaming(camel: &str) -> String {
    let mut out = String::new();
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}
