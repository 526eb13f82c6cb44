//! Kafka connections on one core: the accept loop, framing (4-byte size + body, bounded by
//! `max_request_bytes`), request header decoding, and pipelining: every request of a connection
//! runs as its own task as soon as it is read; responses are written in request order.
//!
//! A malformed frame, an unknown API key or an unsupported version (other than ApiVersions,
//! which answers UNSUPPORTED_VERSION) closes only that connection.

use std::rc::Rc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel;
use glommio::net::{TcpListener, TcpStream};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::api;
use crate::core::CoreState;

/// Accepts connections on this core's listener (SO_REUSEPORT: every core listens on the same
/// port and the kernel spreads connections) until the listener fails.
pub async fn accept_loop(state: Rc<CoreState>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                let state = state.clone();
                let m = &state.metrics;
                m.connections_open.set(m.connections_open.get() + 1);
                crate::metrics::CoreMetrics::add(&m.connections_total, 1);
                glommio::spawn_local(async move {
                    let peer = stream
                        .peer_addr()
                        .map(|a| a.to_string())
                        .unwrap_or_default();
                    if let Err(why) = serve(state.clone(), stream, peer.clone()).await {
                        tracing::debug!(%peer, %why, "connection closed");
                    }
                    let m = &state.metrics;
                    m.connections_open.set(m.connections_open.get() - 1);
                })
                .detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

/// A decoded request, ready for a handler.
pub struct Request {
    pub header: RequestHeader,
    pub api_key: ApiKey,
    pub body: RequestKind,
    /// The client's address as Kafka shows it (`/host`).
    pub peer: String,
}

async fn serve(state: Rc<CoreState>, stream: TcpStream, peer: String) -> Result<(), String> {
    let client_host = format!(
        "/{}",
        peer.rsplit_once(':').map_or(peer.as_str(), |(h, _)| h)
    );
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let max_request_bytes = state.ctx.config.max_request_bytes;
    let (tx, rx) = local_channel::new_bounded::<glommio::task::JoinHandle<Option<Bytes>>>(
        state.ctx.config.max_inflight_requests_per_connection,
    );
    let writer_task = glommio::spawn_local(async move {
        while let Some(pending) = rx.recv().await {
            match pending.await {
                Some(Some(frame)) => {
                    if let Err(e) = writer.write_all(&frame).await {
                        return Err(format!("write: {e}"));
                    }
                }
                Some(None) => {} // acks=0 produce: no response
                None => return Err("request task was cancelled".to_string()),
            }
        }
        writer.flush().await.map_err(|e| format!("flush: {e}"))
    });
    let result = async {
        loop {
            let mut size = [0u8; 4];
            if let Err(e) = reader.read_exact(&mut size).await {
                return if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    Ok(())
                } else {
                    Err(format!("read: {e}"))
                };
            }
            let size = i32::from_be_bytes(size);
            if size < 8 || size as usize > max_request_bytes {
                return Err(format!(
                    "frame size {size} outside 8..={max_request_bytes} (socket.request.max.bytes); closing"
                ));
            }
            crate::metrics::CoreMetrics::add(&state.metrics.request_bytes, size as u64 + 4);
            let mut body = vec![0u8; size as usize];
            reader
                .read_exact(&mut body)
                .await
                .map_err(|e| format!("read: {e}"))?;
            let frame = decode_request(&state, Bytes::from(body), &client_host)?;
            let handle = match frame {
                Decoded::Request(req) => {
                    let req = *req;
                    let state = state.clone();
                    glommio::spawn_local(async move { handle(&state, req).await }).detach()
                }
                Decoded::Immediate(bytes) => glommio::spawn_local(async move { Some(bytes) }).detach(),
            };
            if tx.send(handle).await.is_err() {
                return Err("writer stopped".to_string());
            }
        }
    }
    .await;
    drop(tx);
    let written = writer_task.await;
    result.and(written)
}

enum Decoded {
    Request(Box<Request>),
    /// A response decided at decode time (ApiVersions with an unsupported version).
    Immediate(Bytes),
}

fn decode_request(state: &CoreState, mut body: Bytes, peer: &str) -> Result<Decoded, String> {
    let key = i16::from_be_bytes([body[0], body[1]]);
    let version = i16::from_be_bytes([body[2], body[3]]);
    let correlation_id = i32::from_be_bytes([body[4], body[5], body[6], body[7]]);
    let api_key = ApiKey::try_from(key).map_err(|_| format!("unknown API key {key}"))?;
    let Some(range) = api::supported_versions(api_key) else {
        return Err(format!("unsupported API {api_key:?} (key {key})"));
    };
    if !(range.0..=range.1).contains(&version) {
        if api_key == ApiKey::ApiVersions {
            // Kafka answers with a v0 response carrying UNSUPPORTED_VERSION and the ranges, so
            // the client can retry with a version it shares with us.
            let resp = api::api_versions_response(crate::codes::UNSUPPORTED_VERSION);
            let bytes =
                encode_response(api_key, 0, correlation_id, &ResponseKind::ApiVersions(resp))?;
            return Ok(Decoded::Immediate(bytes));
        }
        return Err(format!(
            "{api_key:?} v{version} is outside the supported range {}..={}",
            range.0, range.1
        ));
    }
    let header = RequestHeader::decode(&mut body, api_key.request_header_version(version))
        .map_err(|e| format!("malformed {api_key:?} v{version} request header: {e}"))?;
    let req = RequestKind::decode(api_key, &mut body, version)
        .map_err(|e| format!("malformed {api_key:?} v{version} request: {e}"))?;
    if body.has_remaining() {
        tracing::debug!(api = ?api_key, version, extra = body.remaining(), "trailing bytes after request");
    }
    if state.ctx.config.log_requests {
        tracing::info!(target: "ringlog::requests", core = state.core, api = ?api_key, version, correlation_id, client = ?header.client_id, request = ?req, "request");
    }
    Ok(Decoded::Request(Box::new(Request {
        header,
        api_key,
        body: req,
        peer: peer.to_string(),
    })))
}

async fn handle(state: &Rc<CoreState>, req: Request) -> Option<Bytes> {
    let m = &state.metrics;
    m.requests_in_flight.set(m.requests_in_flight.get() + 1);
    let started = std::time::Instant::now();
    let api_name = api_name(req.api_key);
    let out = handle_inner(state, req).await;
    let m = &state.metrics;
    m.requests_in_flight.set(m.requests_in_flight.get() - 1);
    if let Some((bytes, code)) = &out {
        crate::metrics::CoreMetrics::add(&m.response_bytes, bytes.len() as u64);
        m.count_request(api_name, *code, started.elapsed());
    } else {
        m.count_request(api_name, 0, started.elapsed());
    }
    out.map(|(b, _)| b)
}

/// The API's name as Kafka spells it, for logs and metrics.
pub fn api_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::JoinGroup => "JoinGroup",
        ApiKey::Heartbeat => "Heartbeat",
        ApiKey::LeaveGroup => "LeaveGroup",
        ApiKey::SyncGroup => "SyncGroup",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::DeleteGroups => "DeleteGroups",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        _ => "Other",
    }
}

async fn handle_inner(state: &Rc<CoreState>, req: Request) -> Option<(Bytes, i16)> {
    let version = req.header.request_api_version;
    let correlation_id = req.header.correlation_id;
    let api_key = req.api_key;
    // A handler bug must not take the core (and every partition on it) down: the panic is
    // logged and this request gets no answer; the connection's other requests go on.
    let dispatched = futures_lite::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
        api::dispatch(state, req),
    ))
    .await;
    let resp = match dispatched {
        Ok(r) => r?,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("?");
            tracing::error!(api = ?api_key, version, correlation_id, panic = what, "request handler panicked");
            return None;
        }
    };
    if state.ctx.config.log_requests {
        tracing::info!(target: "ringlog::requests", core = state.core, api = ?api_key, version, correlation_id, response = ?resp, "response");
    }
    let code = api::first_error(&resp);
    match encode_response(api_key, version, correlation_id, &resp) {
        Ok(b) => Some((b, code)),
        Err(e) => {
            // A response the codec refuses is a broker bug; the client sees the connection
            // close rather than a garbled frame.
            tracing::error!(api = ?api_key, version, error = %e, "cannot encode response");
            None
        }
    }
}

/// Frames a response: size, header (v0, or v1 for flexible versions; ApiVersions always v0),
/// body.
pub fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    resp: &ResponseKind,
) -> Result<Bytes, String> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header_version = if api_key == ApiKey::ApiVersions {
        0
    } else {
        api_key.response_header_version(version)
    };
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, header_version)
        .map_err(|e| format!("encoding response header: {e}"))?;
    resp.encode(&mut buf, version)
        .map_err(|e| format!("encoding {api_key:?} v{version} response: {e}"))?;
    let size = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}
