//! Kafka connections on one core: the accept loop, framing (4-byte size + body, bounded by
//! `max_request_bytes`), request header decoding, and pipelining: every request of a connection
//! runs as its own task as soon as it is read; responses are written in request order.
//!
//! Bounds (every one a `BrokerConfig` setting, see `config.rs`): connections broker-wide and
//! per IP (closed at accept past the limit); requests and bytes in flight per connection (the
//! reader stops reading until responses drain, so a client that pipelines and never reads keeps
//! memory flat); frame bytes in flight per core (taken before a body is read); a frame must
//! arrive whole within `request_timeout_ms` (slowloris) and the peer must take a response
//! within it; an idle connection is closed after `connections_max_idle_ms`. Before a SASL
//! listener's client has authenticated, a frame is at most `sasl_server_max_receive_bytes`
//! (checked on the 4-byte size), takes a budget of its own on the core
//! (`crate::core::PRE_AUTH_FRAMES_PER_CORE`), and the client must authenticate within
//! `sasl_authentication_deadline_ms` of its connection's first read. When the peer goes
//! away the reader stops at once and nothing of the connection stays behind.
//!
//! A malformed frame, an unknown API key or an unsupported version (other than ApiVersions,
//! which answers UNSUPPORTED_VERSION) closes only that connection, after the responses to the
//! requests before it. So does a request whose handler fails (panic, unencodable response):
//! a client never matches a response to the wrong correlation id.

use std::cell::Cell;
use std::net::IpAddr;
use std::rc::Rc;

use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel;
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::{Semaphore, StaticPermit};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::api::{self, Request};
use crate::core::CoreState;

/// First pause after a failed accept (e.g. EMFILE); it doubles up to the maximum.
const ACCEPT_BACKOFF_MIN_MS: u64 = 10;
const ACCEPT_BACKOFF_MAX_MS: u64 = 1_000;
/// At most one "accept failed" line per this interval (with the count since the last one).
const ACCEPT_ERROR_LOG_INTERVAL_MS: u64 = 10_000;
/// Room reserved for the response of a request other than Fetch.
const RESPONSE_RESERVE_BYTES: usize = 64 << 10;

/// Accepts connections on one of this core's listeners (the shared port, SO_REUSEPORT: every
/// core listens on it and the kernel spreads connections; with core-direct on, also the core's
/// own port) until the listener fails. A failed accept (out of
/// file descriptors, say) backs off exponentially and is logged at most once per
/// `ACCEPT_ERROR_LOG_INTERVAL_MS`.
pub async fn accept_loop(state: Rc<CoreState>, listener: TcpListener, index: usize) {
    let mut backoff_ms = ACCEPT_BACKOFF_MIN_MS;
    let mut failed_since_log: u64 = 0;
    let mut last_log: Option<std::time::Instant> = None;
    loop {
        match listener.accept().await {
            Ok(stream) => {
                backoff_ms = ACCEPT_BACKOFF_MIN_MS;
                let peer = stream.peer_addr().ok();
                let state = state.clone();
                glommio::spawn_local(
                    async move { serve_admitted(state, stream, peer, index).await },
                )
                .detach();
            }
            Err(e) => {
                failed_since_log += 1;
                let due = last_log.is_none_or(|t| {
                    t.elapsed() >= Duration::from_millis(ACCEPT_ERROR_LOG_INTERVAL_MS)
                });
                if due {
                    tracing::warn!(error = %e, failures = failed_since_log, backoff_ms, "accept failed (is the fd limit reached?); backing off");
                    failed_since_log = 0;
                    last_log = Some(std::time::Instant::now());
                }
                glommio::timer::sleep(Duration::from_millis(backoff_ms)).await;
                backoff_ms = (backoff_ms * 2).min(ACCEPT_BACKOFF_MAX_MS);
            }
        }
    }
}

async fn serve_admitted(
    state: Rc<CoreState>,
    stream: TcpStream,
    peer: Option<std::net::SocketAddr>,
    listener: usize,
) {
    let cfg = &state.ctx.config;
    let ip = peer.map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip());
    let slot =
        match state
            .ctx
            .connections
            .admit(ip, cfg.max_connections, cfg.max_connections_per_ip)
        {
            Ok(slot) => slot,
            Err(why) => {
                crate::metrics::CoreMetrics::add(&state.metrics.connections_refused, 1);
                tracing::debug!(%ip, %why, "connection refused");
                return; // dropping the stream closes it
            }
        };
    let _ = stream.set_nodelay(true);
    let m = &state.metrics;
    m.connections_open.set(m.connections_open.get() + 1);
    crate::metrics::CoreMetrics::add(&m.connections_total, 1);
    let peer = peer.map(|a| a.to_string()).unwrap_or_default();
    let tls = cfg
        .tls
        .clone()
        .filter(|_| cfg.protocol_of(listener).uses_tls());
    let served = match tls {
        None => serve(state.clone(), stream, peer.clone(), listener, None).await,
        // TLS: the handshake on this core, within a request timeout; then the same
        // connection loop over the encrypted stream.
        Some(tls) => {
            let accept = futures_rustls::TlsAcceptor::from(tls).accept(stream);
            match with_timeout(cfg.request_timeout_ms, "the TLS handshake", accept).await {
                Ok(tls_stream) => {
                    // The client certificate's subject, mapped: the principal on SSL.
                    let certified = tls_stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|c| crate::tls::subject_dn(c))
                        .map(|dn| {
                            format!(
                                "User:{}",
                                crate::tls::principal_of(&cfg.ssl_principal_mapping_rules, &dn)
                            )
                        });
                    serve(state.clone(), tls_stream, peer.clone(), listener, certified).await
                }
                Err(why) => Err(why),
            }
        }
    };
    if let Err(why) = served {
        tracing::debug!(%peer, %why, "connection closed");
    }
    let m = &state.metrics;
    m.connections_open.set(m.connections_open.get() - 1);
    drop(slot);
}

/// Why a request frame could not become a request (the connection closes; nothing of it ran).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("request of {len} bytes has no header")]
    NoHeader { len: usize },
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("unsupported API {api:?} (key {key})")]
    UnsupportedApi { api: ApiKey, key: i16 },
    #[error("{api:?} v{version} is outside the supported range {min}..={max}")]
    UnsupportedVersion {
        api: ApiKey,
        version: i16,
        min: i16,
        max: i16,
    },
    /// Advertised for old clients' sake (Produce min 0), but not readable: Kafka 4 removed
    /// these versions (KIP-896).
    #[error("{api:?} v{version} (message format < 2) is not supported; use v{min} or later")]
    RemovedVersion { api: ApiKey, version: i16, min: i16 },
    #[error("malformed {api:?} v{version} request{part}: {detail}")]
    Malformed {
        api: ApiKey,
        version: i16,
        /// " header" or "" (the body).
        part: &'static str,
        detail: String,
    },
    #[error("malformed barrier request: {0}")]
    Barrier(String),
    #[error("malformed {api:?} v{version} request (decoder panicked)")]
    DecoderPanicked { api: ApiKey, version: i16 },
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// A response the codec refused to encode (a broker bug: the connection closes rather than
/// send a garbled frame).
#[derive(Debug, thiserror::Error)]
#[error("encoding {what}: {detail}")]
pub struct EncodeError {
    what: String,
    detail: String,
}

/// Why a connection closed.
#[derive(Debug, thiserror::Error)]
pub enum CloseReason {
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: no progress within {ms} ms (request-timeout-ms)")]
    Timeout { what: &'static str, ms: u64 },
    #[error("peer closed inside a frame header")]
    PeerClosedInHeader,
    #[error("idle for {ms} ms (connections-max-idle-ms); closing")]
    Idle { ms: u64 },
    #[error("frame header incomplete after {ms} ms (request-timeout-ms); closing")]
    HeaderIncomplete { ms: u64 },
    #[error("frame size {size} outside 8..={max} (max-request-bytes, Kafka's socket.request.max.bytes); closing")]
    FrameSize { size: i32, max: usize },
    #[error("frame size {size} before authentication outside 8..={max} (sasl-server-max-receive-bytes, Kafka's sasl.server.max.receive.size); closing")]
    PreAuthFrameSize { size: i32, max: usize },
    #[error("not authenticated within {ms} ms (sasl-authentication-deadline-ms); closing")]
    AuthenticationDeadline { ms: u64 },
    #[error("{what}: {detail}")]
    Budget { what: &'static str, detail: String },
    #[error("writer stopped")]
    WriterStopped,
    #[error("request task was cancelled")]
    TaskCancelled,
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("API key {key} before SASL authentication (only ApiVersions, SaslHandshake and SaslAuthenticate are read until then)")]
    Unauthenticated { key: i16 },
    #[error("SASL: {0}")]
    SaslEnded(&'static str),
    #[error("a node RPC frame failed peer authentication (cluster secret here: {secret_here}, MAC sent: {mac_sent})")]
    NodeRpcUnauthenticated { secret_here: bool, mac_sent: bool },
    #[error("{api:?} handler panicked: {what}")]
    HandlerPanicked { api: ApiKey, what: String },
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// What a request task hands the writer.
enum Outcome {
    /// A framed response to write.
    Response(Bytes),
    /// Nothing to write (Produce with acks=0).
    Silent,
    /// The handler failed; the connection closes after the responses before this one.
    Failed(CloseReason),
}

/// The budget a request holds from the moment it is read until its response is written or the
/// request ends (whichever is later): frame bytes on the core, bytes on the connection.
struct Held {
    _core: StaticPermit,
    _conn: StaticPermit,
}

type Pending = glommio::task::JoinHandle<(Outcome, Held)>;

/// The budget of a frame answered without the Kafka handlers (node RPC, SASL, an immediate
/// answer): its core bytes, none of the connection's.
async fn held_by_core(
    core: StaticPermit,
    conn_budget: &Rc<Semaphore>,
) -> Result<Held, CloseReason> {
    Ok(Held {
        _core: core,
        _conn: conn_budget
            .acquire_static_permit(0)
            .await
            .map_err(budget_err("connection budget"))?,
    })
}

async fn with_timeout<T>(
    ms: u64,
    what: &'static str,
    f: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, CloseReason> {
    match glommio::timer::timeout(Duration::from_millis(ms), async { Ok(f.await) }).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(source)) => Err(CloseReason::Io { what, source }),
        Err(_) => Err(CloseReason::Timeout { what, ms }),
    }
}

fn budget_err(what: &'static str) -> impl FnOnce(glommio::GlommioError<()>) -> CloseReason {
    move |e| CloseReason::Budget {
        what,
        detail: e.to_string(),
    }
}

async fn serve<S>(
    state: Rc<CoreState>,
    stream: S,
    peer: String,
    listener: usize,
    certified: Option<String>,
) -> Result<(), CloseReason>
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin + 'static,
{
    let client_host = format!(
        "/{}",
        peer.rsplit_once(':').map_or(peer.as_str(), |(h, _)| h)
    );
    let cfg = &state.ctx.config;
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let conn_budget_bytes = cfg.max_inflight_bytes_per_connection as u64;
    let conn_budget = Rc::new(Semaphore::new(conn_budget_bytes));
    let (tx, rx) = local_channel::new_bounded::<Pending>(cfg.max_inflight_requests_per_connection);
    // Dropped by the writer when it stops (peer gone, write failed, handler failed): the
    // reader then stops at once instead of waiting for room that never comes.
    let (writer_alive, writer_gone) = local_channel::new_bounded::<()>(1);
    let write_timeout_ms = cfg.request_timeout_ms;
    let writer_task = glommio::spawn_local(async move {
        let _alive = writer_alive;
        while let Some(pending) = rx.recv().await {
            let Some((outcome, held)) = pending.await else {
                return Err(CloseReason::TaskCancelled);
            };
            match outcome {
                Outcome::Response(frame) => {
                    // A response the peer does not take within a request timeout ends the
                    // connection (a user-space timer: a socket write timeout would link a
                    // timeout to every send on the ring).
                    with_timeout(
                        write_timeout_ms,
                        "writing a response",
                        writer.write_all(&frame),
                    )
                    .await?;
                }
                Outcome::Silent => {}
                Outcome::Failed(why) => {
                    let _ = writer.flush().await;
                    return Err(why);
                }
            }
            drop(held);
        }
        writer.flush().await.map_err(|source| CloseReason::Io {
            what: "flush",
            source,
        })
    });
    // Something of this connection is in flight (a request running or a response unwritten)
    // while any of its byte budget is taken.
    let in_flight = || conn_budget.available() < conn_budget_bytes;
    // Set by a handler whose client went over its quota: when the next read may start.
    let mute: Rc<Cell<Option<Instant>>> = Rc::new(Cell::new(None));
    let reader_loop = async {
        // The client's address as ACLs name hosts (an IP, no port).
        let peer_ip = peer
            .rsplit_once(':')
            .map_or(peer.as_str(), |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        // Touched by this loop alone, between frames: a SASL step runs before the next
        // frame is read.
        let mut auth = crate::sasl::Auth::new(cfg.protocol_of(listener), certified);
        // Who this connection's requests come from, shared by all of them (the produce path
        // allocates nothing for it); made again only when a SASL step changes the principal.
        let subject_of = |auth: &crate::sasl::Auth| {
            Rc::new(crate::acl::Subject {
                principal: auth
                    .principal()
                    .unwrap_or(crate::sasl::ANONYMOUS)
                    .to_string(),
                host: peer_ip.clone(),
                authenticated: auth.authenticates(),
            })
        };
        let mut subject = subject_of(&auth);
        // The principal of the first authentication: a re-authentication (KIP-368) must be
        // as the same one.
        let mut authenticated_as: Option<String> = None;
        // A SASL listener's client must authenticate by this instant, or it is closed; until
        // it has, its frames are at most `sasl-server-max-receive-bytes` and take the core's
        // pre-authentication budget (`None`: authenticated, or a listener without SASL).
        let deadline_ms = cfg.sasl_authentication_deadline_ms;
        let mut auth_deadline = auth
            .awaits_authentication()
            .then(|| Instant::now() + Duration::from_millis(deadline_ms));
        let past_deadline = |d: Option<Instant>| d.is_some_and(|d| Instant::now() >= d);
        // The time left to `d` in ms (at least 1), capped at `ms`.
        let within = |d: Option<Instant>, ms: u64| match d {
            Some(d) => {
                (d.saturating_duration_since(Instant::now()).as_millis() as u64).clamp(1, ms)
            }
            None => ms,
        };
        loop {
            // A client over its quota: nothing more is read until its throttle has passed.
            if let Some(until) = mute.take() {
                let now = Instant::now();
                if until > now {
                    glommio::timer::sleep(until - now).await;
                }
            }
            let mut size = [0u8; 4];
            // Wait for the next request; an idle connection (nothing in flight) is closed.
            let mut got = 0;
            while got < 4 {
                if past_deadline(auth_deadline) {
                    return Err(CloseReason::AuthenticationDeadline { ms: deadline_ms });
                }
                let wait_ms = within(
                    auth_deadline,
                    if got == 0 {
                        cfg.connections_max_idle_ms
                    } else {
                        cfg.request_timeout_ms
                    },
                );
                match glommio::timer::timeout(Duration::from_millis(wait_ms), async {
                    Ok::<_, glommio::GlommioError<()>>(reader.read(&mut size[got..]).await)
                })
                .await
                {
                    Ok(Ok(0)) if got == 0 => return Ok(()),
                    Ok(Ok(0)) => return Err(CloseReason::PeerClosedInHeader),
                    Ok(Ok(n)) => got += n,
                    Ok(Err(source)) => {
                        return Err(CloseReason::Io {
                            what: "read",
                            source,
                        })
                    }
                    Err(_) if past_deadline(auth_deadline) => {
                        return Err(CloseReason::AuthenticationDeadline { ms: deadline_ms })
                    }
                    Err(_) if got == 0 && in_flight() => continue,
                    Err(_) if got == 0 => return Err(CloseReason::Idle { ms: wait_ms }),
                    Err(_) => return Err(CloseReason::HeaderIncomplete { ms: wait_ms }),
                }
            }
            let size = i32::from_be_bytes(size);
            let pre_auth = auth_deadline.is_some();
            if pre_auth {
                let max = cfg.sasl_server_max_receive_bytes.min(cfg.max_request_bytes);
                if size < 8 || size as usize > max {
                    return Err(CloseReason::PreAuthFrameSize { size, max });
                }
            } else if size < 8 || size as usize > cfg.max_request_bytes {
                return Err(CloseReason::FrameSize {
                    size,
                    max: cfg.max_request_bytes,
                });
            }
            let size = size as usize;
            // The core's budget for frame bytes, before a byte of the body is held (it holds
            // the largest frame: `BrokerConfig::validate`); an unauthenticated client's frame
            // takes the pre-authentication budget instead.
            debug_assert!(size <= cfg.queued_max_request_bytes_per_core);
            let core_permit = if pre_auth {
                // Waiting for room counts against the authentication deadline too.
                let wait = Duration::from_millis(within(auth_deadline, deadline_ms));
                let acquire = state
                    .admission
                    .pre_auth_request_bytes
                    .acquire_static_permit(size as u64);
                match glommio::timer::timeout(wait, async { Ok(acquire.await) }).await {
                    Ok(permit) => {
                        permit.map_err(budget_err("pre-authentication request budget"))?
                    }
                    Err(_) => {
                        return Err(CloseReason::AuthenticationDeadline { ms: deadline_ms });
                    }
                }
            } else {
                state
                    .admission
                    .request_bytes
                    .acquire_static_permit(size as u64)
                    .await
                    .map_err(budget_err("request budget"))?
            };
            crate::metrics::CoreMetrics::add(&state.metrics.request_bytes, size as u64 + 4);
            // Allocated whole (the core's budget covers it): `calloc` maps a large body
            // lazily, so a slow sender pins only the pages it filled; one copy from the socket.
            let mut body = vec![0u8; size];
            let read = with_timeout(
                within(auth_deadline, cfg.request_timeout_ms),
                "reading a request body",
                reader.read_exact(&mut body),
            )
            .await;
            if read.is_err() && past_deadline(auth_deadline) {
                return Err(CloseReason::AuthenticationDeadline { ms: deadline_ms });
            }
            read?;
            let key = i16::from_be_bytes([body[0], body[1]]);
            if !auth.admits(key) {
                return Err(CloseReason::Unauthenticated { key });
            }
            if auth.expired()
                && ![
                    ApiKey::ApiVersions,
                    ApiKey::SaslHandshake,
                    ApiKey::SaslAuthenticate,
                ]
                .iter()
                .any(|k| *k as i16 == key)
            {
                return Err(CloseReason::SaslEnded(
                    "the session ended without re-authentication (KIP-368)",
                ));
            }
            let req = match decode_request(&state, Bytes::from(body), &client_host)? {
                Decoded::Request(req)
                    if matches!(
                        req.api_key,
                        ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
                    ) =>
                {
                    let (frame, close) =
                        sasl_step(&state, &mut auth, &mut authenticated_as, *req, &peer).await?;
                    subject = subject_of(&auth);
                    if authenticated_as.is_some() {
                        auth_deadline = None;
                    }
                    let held = held_by_core(core_permit, &conn_budget).await?;
                    let h = glommio::spawn_local(async move { (Outcome::Response(frame), held) })
                        .detach();
                    tx.send(h).await.map_err(|_| CloseReason::WriterStopped)?;
                    if close {
                        return Err(CloseReason::SaslEnded("authentication refused"));
                    }
                    continue;
                }
                Decoded::Request(mut req) => {
                    req.listener = listener;
                    req.subject = subject.clone();
                    // A produce quota is charged as the frame is read, so that the next read
                    // waits for it: the client's bytes come in at its quota's rate, not in
                    // bursts of what it had in flight.
                    if req.api_key == ApiKey::Produce && quotas_set(&state) {
                        let now = Instant::now();
                        req.throttle_ms = charge(
                            &state,
                            &req,
                            &crate::quota::Usage {
                                produce_bytes: req.frame_bytes as u64,
                                ..Default::default()
                            },
                            now,
                        );
                        mute_for(&mute, now, req.throttle_ms);
                    }
                    *req
                }
                // A node RPC frame without the MAC of this node's cluster secret (or with one
                // when it has none) closes the connection, its body unread.
                Decoded::NodeRpc {
                    correlation_id,
                    mac,
                    body,
                } if !crate::node_rpc::authentic(
                    cfg.cluster_secret.as_deref(),
                    correlation_id,
                    &body,
                    mac.as_deref(),
                ) =>
                {
                    return Err(CloseReason::NodeRpcUnauthenticated {
                        secret_here: cfg.cluster_secret.is_some(),
                        mac_sent: mac.is_some(),
                    });
                }
                // Answered without the Kafka handlers: the frame's core budget is held until
                // the answer is written, and none of the connection's.
                other => {
                    let held = held_by_core(core_permit, &conn_budget).await?;
                    let task_state = state.clone();
                    let subject = subject.clone();
                    let h = glommio::spawn_local(async move {
                        let frame = match other {
                            // Nothing to run: answered now.
                            Decoded::Immediate(bytes) => bytes,
                            Decoded::NodeRpc {
                                correlation_id,
                                body,
                                ..
                            } => {
                                let answer = serve_node_rpc(&task_state, &body).await;
                                crate::node_rpc::response_frame(correlation_id, &answer)
                            }
                            Decoded::Barrier {
                                correlation_id,
                                request,
                            } => {
                                let answer =
                                    crate::api::barrier::serve_as(&task_state, &subject, *request)
                                        .await;
                                kfc4::wire::encode_response_frame(correlation_id, &answer).into()
                            }
                            Decoded::Request(_) => unreachable!("matched above"),
                        };
                        (Outcome::Response(frame), held)
                    })
                    .detach();
                    tx.send(h).await.map_err(|_| CloseReason::WriterStopped)?;
                    continue;
                }
            };
            let reserve = match &req.body {
                RequestKind::Fetch(f) => api::fetch::response_cap_bytes(f, cfg),
                _ => RESPONSE_RESERVE_BYTES,
            };
            // The connection's budget: at most the whole of it (a request larger than the
            // budget runs alone).
            let conn_units = ((size + reserve) as u64).min(conn_budget_bytes);
            let conn_permit = conn_budget
                .acquire_static_permit(conn_units)
                .await
                .map_err(budget_err("connection budget"))?;
            let held = Held {
                _core: core_permit,
                _conn: conn_permit,
            };
            let task_state = state.clone();
            let task_mute = mute.clone();
            let h =
                glommio::spawn_local(
                    async move { (handle(&task_state, req, &task_mute).await, held) },
                )
                .detach();
            if tx.send(h).await.is_err() {
                return Err(CloseReason::WriterStopped);
            }
        }
    };
    // `None`: the writer stopped first (peer gone, a request failed); its error is the reason.
    let read = futures_lite::future::or(async { Some(reader_loop.await) }, async {
        let _ = writer_gone.recv().await;
        None
    })
    .await;
    drop(tx);
    let written = writer_task.await;
    match read {
        Some(Err(why)) => Err(why),
        Some(Ok(())) | None => written,
    }
}

/// Runs one SASL request of this connection (`crate::sasl`): its framed answer, and whether
/// the connection closes after it.
async fn sasl_step(
    state: &CoreState,
    auth: &mut crate::sasl::Auth,
    authenticated_as: &mut Option<String>,
    req: Request,
    peer: &str,
) -> Result<(Bytes, bool), CloseReason> {
    let version = req.header.request_api_version;
    let correlation_id = req.header.correlation_id;
    let (resp, close) = match req.body {
        RequestKind::SaslHandshake(r) => {
            let (r, close) = crate::sasl::handshake(&state.ctx.config, auth, &r);
            (ResponseKind::SaslHandshake(r), close)
        }
        RequestKind::SaslAuthenticate(r) => {
            let (r, close) =
                crate::sasl::authenticate(state, auth, authenticated_as.as_deref(), &r, peer).await;
            if let (crate::sasl::Auth::Done { principal, .. }, false) = (&*auth, close) {
                authenticated_as.get_or_insert_with(|| principal.clone());
            }
            (ResponseKind::SaslAuthenticate(r), close)
        }
        _ => unreachable!("only SASL requests come here"),
    };
    let frame = encode_response(req.api_key, version, correlation_id, &resp)?;
    Ok((frame, close))
}

/// Answers one node RPC frame (`crate::node_rpc`): its rkyv body (validated first) with the rkyv body of its answer.
async fn serve_node_rpc(state: &Rc<CoreState>, body: &[u8]) -> Vec<u8> {
    use crate::node_rpc::{encode_response, NodeRequest, NodeResponse};
    let resp = match meta::wire::decode::<NodeRequest>(body, "node request") {
        Err(e) => NodeResponse::Failed {
            reason: e.to_string(),
        },
        Ok(req @ (NodeRequest::AppendChild { .. } | NodeRequest::HighWatermark { .. })) => {
            crate::fanout_runtime::serve_node_request(state, req).await
        }
        Ok(req @ (NodeRequest::TxnBegin { .. } | NodeRequest::TxnMarker { .. })) => {
            crate::coordinators::txn::serve_node_request(state, req).await
        }
        Ok(req @ NodeRequest::BarrierMarker { .. }) => {
            crate::coordinators::barrier::serve_node_request(state, req).await
        }
        Ok(
            req @ (NodeRequest::ReplicaFetch { .. }
            | NodeRequest::ReplicaFetchMany { .. }
            | NodeRequest::LeaderEpochEnd { .. }),
        ) => crate::replica::serve_node_request(state, req).await,
        Ok(req) => crate::partition_move::serve(state, req).await,
    };
    encode_response(&resp)
}

pub enum Decoded {
    Request(Box<Request>),
    /// A response decided at decode time (ApiVersions with an unsupported version).
    Immediate(Bytes),
    /// Another node's call (`crate::node_rpc`): its correlation id, its MAC (version 1) and
    /// rkyv body.
    NodeRpc {
        correlation_id: i32,
        mac: Option<Bytes>,
        body: Bytes,
    },
    /// A barrier API request (keys 1010–1014, `kfc4::wire`), answered by
    /// `crate::api::barrier` outside the kafka-protocol handlers.
    Barrier {
        correlation_id: i32,
        request: Box<kfc4::wire::BarrierRequest>,
    },
}

fn decode_request(state: &CoreState, body: Bytes, peer: &str) -> Result<Decoded, DecodeError> {
    let decoded = decode_frame(body, peer)?;
    if let (Decoded::Request(req), true) = (&decoded, state.ctx.config.log_requests) {
        tracing::info!(target: "ringlog::requests", core = state.core, api = ?req.api_key, version = req.header.request_api_version, correlation_id = req.header.correlation_id, client = ?req.header.client_id, request = ?req.body, "request");
    }
    Ok(decoded)
}

/// One request frame's body (after the size) → a request for a handler, an immediate answer,
/// or the reason to close the connection. Pure (no broker state): the fuzz target
/// `request_decode` drives it with arbitrary bytes.
pub fn decode_frame(mut body: Bytes, peer: &str) -> Result<Decoded, DecodeError> {
    let frame_bytes = body.len();
    if body.len() < 8 {
        return Err(DecodeError::NoHeader { len: body.len() });
    }
    let key = i16::from_be_bytes([body[0], body[1]]);
    let version = i16::from_be_bytes([body[2], body[3]]);
    let correlation_id = i32::from_be_bytes([body[4], body[5], body[6], body[7]]);
    if key == crate::node_rpc::NODE_RPC_API_KEY && version == crate::node_rpc::NODE_RPC_VERSION {
        return Ok(Decoded::NodeRpc {
            correlation_id,
            mac: None,
            body: body.slice(8..),
        });
    }
    let mac_end = 8 + crate::node_rpc::NODE_RPC_MAC_BYTES;
    if key == crate::node_rpc::NODE_RPC_API_KEY
        && version == crate::node_rpc::NODE_RPC_AUTH_VERSION
        && body.len() >= mac_end
    {
        return Ok(Decoded::NodeRpc {
            correlation_id,
            mac: Some(body.slice(8..mac_end)),
            body: body.slice(mac_end..),
        });
    }
    if kfc4::wire::is_barrier_api(key) {
        let (header, request) = kfc4::wire::decode_request_frame(&body)
            .map_err(|e| DecodeError::Barrier(e.to_string()))?;
        return Ok(Decoded::Barrier {
            correlation_id: header.correlation_id,
            request: Box::new(request),
        });
    }
    let api_key = ApiKey::try_from(key).map_err(|_| DecodeError::UnknownApiKey(key))?;
    let Some(range) = api::supported_versions(api_key) else {
        return Err(DecodeError::UnsupportedApi { api: api_key, key });
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
        return Err(DecodeError::UnsupportedVersion {
            api: api_key,
            version,
            min: range.0,
            max: range.1,
        });
    }
    let codec = api_key.valid_versions();
    if version < codec.min {
        // Advertised for old clients' sake (Produce min 0), but not readable: Kafka 4 removed
        // these versions (KIP-896).
        return Err(DecodeError::RemovedVersion {
            api: api_key,
            version,
            min: codec.min,
        });
    }
    let (header, req) = decode_body(api_key, version, &mut body)?;
    if body.has_remaining() {
        tracing::debug!(api = ?api_key, version, extra = body.remaining(), "trailing bytes after request");
    }
    Ok(Decoded::Request(Box::new(Request {
        header,
        api_key,
        body: req,
        peer: peer.to_string(),
        listener: 0,
        subject: crate::acl::Subject::anonymous(),
        frame_bytes,
        throttle_ms: 0,
    })))
}

/// The decode entry point: header and body of one request frame (after the size), by the
/// generated codec. Never panics: a codec panic (it should have none) is a malformed request.
/// Oversized up-front reservations of the codec cost no memory (`crate::lazy_reserve`).
pub fn decode_body(
    api_key: ApiKey,
    version: i16,
    body: &mut Bytes,
) -> Result<(RequestHeader, RequestKind), DecodeError> {
    fn malformed<E: std::fmt::Display>(
        api: ApiKey,
        version: i16,
        part: &'static str,
    ) -> impl FnOnce(E) -> DecodeError {
        move |e| DecodeError::Malformed {
            api,
            version,
            part,
            detail: e.to_string(),
        }
    }
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let header = RequestHeader::decode(body, api_key.request_header_version(version))
            .map_err(malformed(api_key, version, " header"))?;
        let req =
            RequestKind::decode(api_key, body, version).map_err(malformed(api_key, version, ""))?;
        Ok((header, req))
    }));
    decoded.unwrap_or(Err(DecodeError::DecoderPanicked {
        api: api_key,
        version,
    }))
}

/// One request, in a `request` span (target `ringlog::trace`, off unless traced: then the
/// partition spans on other cores nest under it, `crate::route` carries it along).
#[tracing::instrument(
    target = "ringlog::trace",
    name = "request",
    level = "trace",
    skip_all,
    fields(api = api_name(req.api_key), correlation_id = req.header.correlation_id, core = state.core)
)]
async fn handle(state: &Rc<CoreState>, req: Request, mute: &Cell<Option<Instant>>) -> Outcome {
    let m = &state.metrics;
    m.requests_in_flight.set(m.requests_in_flight.get() + 1);
    let started = std::time::Instant::now();
    let api_name = api_name(req.api_key);
    let out = handle_inner(state, req, mute).await;
    let m = &state.metrics;
    m.requests_in_flight.set(m.requests_in_flight.get() - 1);
    match &out {
        Ok(Some((bytes, code))) => {
            crate::metrics::CoreMetrics::add(&m.response_bytes, bytes.len() as u64);
            m.count_request(api_name, *code, started.elapsed());
        }
        _ => m.count_request(api_name, 0, started.elapsed()),
    }
    match out {
        Ok(Some((b, _))) => Outcome::Response(b),
        Ok(None) => Outcome::Silent,
        Err(why) => Outcome::Failed(why),
    }
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
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::OffsetDelete => "OffsetDelete",
        ApiKey::DescribeCluster => "DescribeCluster",
        ApiKey::DescribeTopicPartitions => "DescribeTopicPartitions",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        ApiKey::AddPartitionsToTxn => "AddPartitionsToTxn",
        ApiKey::AddOffsetsToTxn => "AddOffsetsToTxn",
        ApiKey::EndTxn => "EndTxn",
        ApiKey::TxnOffsetCommit => "TxnOffsetCommit",
        ApiKey::WriteTxnMarkers => "WriteTxnMarkers",
        ApiKey::DescribeTransactions => "DescribeTransactions",
        ApiKey::DescribeProducers => "DescribeProducers",
        ApiKey::DescribeLogDirs => "DescribeLogDirs",
        ApiKey::DescribeQuorum => "DescribeQuorum",
        ApiKey::UpdateFeatures => "UpdateFeatures",
        ApiKey::AlterReplicaLogDirs => "AlterReplicaLogDirs",
        ApiKey::ElectLeaders => "ElectLeaders",
        ApiKey::AlterPartitionReassignments => "AlterPartitionReassignments",
        ApiKey::ListPartitionReassignments => "ListPartitionReassignments",
        ApiKey::ListTransactions => "ListTransactions",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::CreateAcls => "CreateAcls",
        ApiKey::DescribeAcls => "DescribeAcls",
        ApiKey::DeleteAcls => "DeleteAcls",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
        ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
        ApiKey::DescribeClientQuotas => "DescribeClientQuotas",
        ApiKey::AlterClientQuotas => "AlterClientQuotas",
        ApiKey::GetTelemetrySubscriptions => "GetTelemetrySubscriptions",
        ApiKey::PushTelemetry => "PushTelemetry",
        _ => "Other",
    }
}

/// Whether any client quota is set (`crate::quota`).
fn quotas_set(state: &CoreState) -> bool {
    !state.meta.borrow().client_quotas.is_empty()
}

/// Charges `usage` to the quotas of `req`'s client; the throttle it earns, in ms.
fn charge(state: &CoreState, req: &Request, usage: &crate::quota::Usage, now: Instant) -> u64 {
    charge_as(
        state,
        &req.subject,
        req.header.client_id.as_deref(),
        usage,
        now,
    )
}

fn charge_as(
    state: &CoreState,
    subject: &crate::acl::Subject,
    client_id: Option<&str>,
    usage: &crate::quota::Usage,
    now: Instant,
) -> u64 {
    state.admission.quotas.borrow_mut().charge(
        &state.meta.borrow(),
        state.ctx.config.quota_burst_ms,
        crate::quota::quota_user(&subject.principal),
        client_id.unwrap_or(""),
        usage,
        now,
    )
}

/// Holds the connection's next read back `throttle_ms` from `now` (or longer, if it was).
fn mute_for(mute: &Cell<Option<Instant>>, now: Instant, throttle_ms: u64) {
    if throttle_ms > 0 {
        let until = now + Duration::from_millis(throttle_ms);
        mute.set(Some(mute.get().map_or(until, |m| m.max(until))));
    }
}

/// `Ok(None)`: no response (acks=0). `Err`: the handler failed and the connection must close.
/// A client over its quota (`crate::quota`) is told in the response's `throttle_time_ms`, and
/// `mute` holds the connection's next read back until the throttle has passed.
async fn handle_inner(
    state: &Rc<CoreState>,
    req: Request,
    mute: &Cell<Option<Instant>>,
) -> Result<Option<(Bytes, i16)>, CloseReason> {
    let version = req.header.request_api_version;
    let correlation_id = req.header.correlation_id;
    let api_key = req.api_key;
    // The fetch bytes and core time of the request are charged when it is done (its
    // produce bytes were, as it was read), when any quota is set (none: no per-request work).
    let charged = quotas_set(state).then(|| (req.subject.clone(), req.header.client_id.clone()));
    let read_throttle_ms = req.throttle_ms;
    // A handler bug must not take the core (and every partition on it) down: the panic is
    // logged and the connection closes after the responses before this request.
    let dispatched = futures_lite::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
        api::dispatch(state, req),
    ));
    let (dispatched, spent) = if charged.is_some() {
        crate::quota::timed(dispatched).await
    } else {
        (dispatched.await, Duration::ZERO)
    };
    let mut resp = match dispatched {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("?");
            tracing::error!(api = ?api_key, version, correlation_id, panic = what, "request handler panicked; closing the connection");
            return Err(CloseReason::HandlerPanicked {
                api: api_key,
                what: what.to_string(),
            });
        }
    };
    if let Some((subject, client_id)) = charged {
        let usage = crate::quota::Usage {
            fetch_bytes: resp.as_ref().map_or(0, crate::quota::fetch_bytes),
            request_time: spent,
            ..Default::default()
        };
        let now = Instant::now();
        let throttle_ms = charge_as(state, &subject, client_id.as_deref(), &usage, now);
        mute_for(mute, now, throttle_ms);
        let throttle_ms = throttle_ms.max(read_throttle_ms);
        if throttle_ms > 0 {
            tracing::debug!(principal = subject.principal, client = ?client_id, throttle_ms, api = ?api_key, "client over its quota: throttled");
            if let Some(r) = resp.as_mut() {
                crate::quota::set_throttle(r, throttle_ms as i32);
            }
        }
    }
    let Some(resp) = resp else {
        return Ok(None);
    };
    if state.ctx.config.log_requests {
        tracing::info!(target: "ringlog::requests", core = state.core, api = ?api_key, version, correlation_id, response = ?resp, "response");
    }
    let code = api::first_error(&resp);
    match encode_response(api_key, version, correlation_id, &resp) {
        Ok(b) => Ok(Some((b, code))),
        Err(e) => {
            // A response the codec refuses is a broker bug; the client sees the connection
            // close rather than a garbled frame or a missing answer.
            tracing::error!(api = ?api_key, version, error = %e, "cannot encode response; closing the connection");
            Err(e.into())
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
) -> Result<Bytes, EncodeError> {
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
        .map_err(|e| EncodeError {
            what: "response header".into(),
            detail: e.to_string(),
        })?;
    resp.encode(&mut buf, version).map_err(|e| EncodeError {
        what: format!("{api_key:?} v{version} response"),
        detail: e.to_string(),
    })?;
    let size = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}
