//! `ringlog proxy --listen A --upstream B`: a TCP proxy that forwards bytes unchanged and decodes
//! the Kafka frames in both directions, logging each request (API, version, correlation id,
//! client id) and each response (API, size) through `tracing` (target `ringlog::proxy`).
//!
//! One pair of threads per connection. Responses carry only a correlation id, so the
//! request direction remembers (api key, version) per correlation id for the response
//! direction. A frame that does not decode is logged and the connection closed.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use clap::Args;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Decodable;

#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Address to accept clients on.
    #[arg(long, default_value = "127.0.0.1:9093")]
    listen: String,
    /// The broker to forward to.
    #[arg(long, default_value = "127.0.0.1:9092")]
    upstream: String,
    /// Largest frame accepted in either direction; a larger one closes the connection.
    #[arg(long, default_value_t = 256 << 20)]
    max_frame_bytes: usize,
}

/// correlation id → (api key, version) of requests awaiting their response.
type InFlight = Arc<Mutex<HashMap<i32, (ApiKey, i16)>>>;

pub fn run(args: ProxyArgs) -> Result<(), String> {
    init_logging();
    let listener = TcpListener::bind(&args.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let upstream = args
        .upstream
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve upstream {:?}: {e}", args.upstream))?
        .next()
        .ok_or_else(|| format!("upstream {:?} resolves to nothing", args.upstream))?;
    tracing::info!(
        target: "ringlog::proxy",
        listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        upstream = %upstream,
        "ringlog proxy ready"
    );
    let next_id = AtomicU64::new(1);
    for conn in listener.incoming() {
        let client = match conn {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(target: "ringlog::proxy", error = %e, "accept failed");
                continue;
            }
        };
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        let peer = client
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let server = match TcpStream::connect(upstream) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(target: "ringlog::proxy", conn = id, error = %e, "cannot connect upstream; closing client");
                continue;
            }
        };
        tracing::info!(target: "ringlog::proxy", conn = id, client = %peer, "connection opened");
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let inflight: InFlight = Arc::default();
        let max = args.max_frame_bytes;
        let spawn = |from: TcpStream, to: TcpStream, requests: bool| {
            let inflight = inflight.clone();
            std::thread::Builder::new()
                .name(format!(
                    "proxy-{id}-{}",
                    if requests { "req" } else { "resp" }
                ))
                .spawn(move || pump(id, from, to, requests, inflight, max))
        };
        let pair = (|| -> std::io::Result<()> {
            spawn(client.try_clone()?, server.try_clone()?, true)?;
            spawn(server, client, false)?;
            Ok(())
        })();
        if let Err(e) = pair {
            tracing::warn!(target: "ringlog::proxy", conn = id, error = %e, "cannot start connection threads");
        }
    }
    Ok(())
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RINGLOG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Reads one frame (`i32` size + body). `Ok(None)` on a clean EOF before a frame starts.
fn read_frame(s: &mut TcpStream, max: usize) -> Result<Option<Vec<u8>>, String> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match s.read(&mut size[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err("connection closed inside a frame's size".into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > max {
        return Err(format!("malformed frame: size {size} (limit {max} bytes)"));
    }
    let mut body = vec![0u8; size as usize];
    s.read_exact(&mut body)
        .map_err(|e| format!("connection closed inside a {size}-byte frame: {e}"))?;
    Ok(Some(body))
}

fn pump(
    id: u64,
    mut from: TcpStream,
    mut to: TcpStream,
    requests: bool,
    inflight: InFlight,
    max: usize,
) {
    let dir = if requests { "client" } else { "upstream" };
    loop {
        let body = match read_frame(&mut from, max) {
            Ok(Some(b)) => b,
            Ok(None) => {
                tracing::info!(target: "ringlog::proxy", conn = id, "{dir} closed the connection");
                break;
            }
            Err(e) => {
                if e.starts_with("malformed") {
                    tracing::warn!(target: "ringlog::proxy", conn = id, from = dir, "{e}; closing the connection");
                } else {
                    tracing::info!(target: "ringlog::proxy", conn = id, from = dir, "{e}; closing the connection");
                }
                break;
            }
        };
        let decoded = if requests {
            decode_request(id, &body, &inflight)
        } else {
            decode_response(id, &body, &inflight)
        };
        if let Err(e) = decoded {
            tracing::warn!(
                target: "ringlog::proxy",
                conn = id,
                from = dir,
                size = body.len(),
                "malformed frame: {e}; closing the connection"
            );
            break;
        }
        let mut frame = Vec::with_capacity(body.len() + 4);
        frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
        frame.extend_from_slice(&body);
        if let Err(e) = to.write_all(&frame) {
            tracing::info!(target: "ringlog::proxy", conn = id, "forwarding failed: {e}; closing the connection");
            break;
        }
    }
    // Closing both sockets ends the other direction's thread too.
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Logs one decoded frame of connection `id` (a request's with its client id).
fn log_frame(
    kind: &str,
    id: u64,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
    size: usize,
) {
    tracing::info!(
        target: "ringlog::proxy",
        conn = id,
        api = ?api,
        version,
        correlation_id,
        client_id = client_id.map(tracing::field::display),
        size,
        "{kind} {api:?}"
    );
}

fn decode_request(id: u64, body: &[u8], inflight: &InFlight) -> Result<(), String> {
    if body.len() < 8 {
        return Err(format!(
            "request of {} bytes is shorter than a header",
            body.len()
        ));
    }
    let key = i16::from_be_bytes([body[0], body[1]]);
    let version = i16::from_be_bytes([body[2], body[3]]);
    let api = ApiKey::try_from(key).map_err(|_| format!("unknown API key {key}"))?;
    let mut b = Bytes::copy_from_slice(body);
    let header = RequestHeader::decode(&mut b, api.request_header_version(version))
        .map_err(|e| format!("{api:?} v{version} request header: {e}"))?;
    let corr = header.correlation_id;
    let client_id = header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    let mut expects_response = true;
    let mut response_version = version;
    match RequestKind::decode(api, &mut b, version) {
        Ok(RequestKind::Produce(p)) => expects_response = p.acks != 0,
        Ok(_) => {}
        // A client may probe ApiVersions at a version newer than this proxy knows; the broker
        // answers UNSUPPORTED_VERSION in the v0 layout, so forward it.
        Err(_)
            if api == ApiKey::ApiVersions && version > ApiKey::ApiVersions.valid_versions().max =>
        {
            response_version = 0;
        }
        Err(e) => return Err(format!("{api:?} v{version} request body: {e}")),
    }
    log_frame(
        "request",
        id,
        api,
        version,
        corr,
        Some(&client_id),
        body.len(),
    );
    if expects_response {
        inflight
            .lock()
            .expect("in-flight map lock")
            .insert(corr, (api, response_version));
    }
    Ok(())
}

fn decode_response(id: u64, body: &[u8], inflight: &InFlight) -> Result<(), String> {
    if body.len() < 4 {
        return Err(format!(
            "response of {} bytes has no correlation id",
            body.len()
        ));
    }
    let corr = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    let Some((api, version)) = inflight.lock().expect("in-flight map lock").remove(&corr) else {
        return Err(format!("response to unknown correlation id {corr}"));
    };
    let mut b = Bytes::copy_from_slice(body);
    ResponseHeader::decode(&mut b, api.response_header_version(version))
        .map_err(|e| format!("{api:?} v{version} response header: {e}"))?;
    let mut retry = b.clone();
    if let Err(e) = ResponseKind::decode(api, &mut b, version) {
        // A broker refuses an ApiVersions version it does not know with a v0 body.
        if api != ApiKey::ApiVersions || ResponseKind::decode(api, &mut retry, 0).is_err() {
            return Err(format!("{api:?} v{version} response body: {e}"));
        }
    }
    log_frame("response", id, api, version, corr, None, body.len());
    Ok(())
}
