//! The admin HTTP listener (`serve --metrics-listen`), served by core 0, like Redpanda's admin
//! API:
//! - `GET /metrics`: every core's metrics (`core` label) in the OpenMetrics text format that
//!   Prometheus scrapes, encoded by `prometheus-client` (`crate::metrics`).
//! - `GET /v1/shards?interval_ms=N&hot=K`: the per-core view over the next N ms (rates,
//!   exact latency percentiles, the K hottest partitions) as JSON (`crate::shard_view`).
//! - `POST /v1/shard-move?topic=T&partition=P&core=N`: moves a partition to another core of
//!   this node on a live broker (the SRE tuning lever); answers JSON.
//! - `POST /v1/partition-move?topic=T&partition=P&node=N[&core=C]`: moves a partition to
//!   another node of the cluster (`crate::partition_move`), from whichever node is asked;
//!   answers JSON once the new owner serves it.
//! - `POST /v1/scram-user?user=U&mechanism=SCRAM-SHA-512&iterations=N&salt=HEX&salted=HEX`,
//!   `DELETE /v1/scram-user?user=U[&mechanism=M]`, `GET /v1/scram-users`: the SCRAM users
//!   of SASL listeners (`ringlog user`), managed without a Kafka connection, so the first
//!   user of a SASL-only node can be made.
//!
//! Requests are small and rare: one task per connection, `Connection: close`; the head is
//! parsed by `httparse` within `MAX_REQUEST_HEAD_BYTES` and `MAX_REQUEST_HEADERS`.

use std::collections::HashMap;
use std::rc::Rc;

use engine::join::join_all;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use meta::Command;

use crate::core::CoreState;
use crate::metrics::{self, Snapshot};
use crate::shard_view;

/// Largest HTTP request head accepted.
const MAX_REQUEST_HEAD_BYTES: usize = 8 * 1024;
/// Most headers a request head may carry.
const MAX_REQUEST_HEADERS: usize = 32;
/// `/v1/shards`' interval when the request names none, in milliseconds.
pub const DEFAULT_VIEW_INTERVAL_MS: u64 = 1_000;
/// Admin connections served at once; more are closed at accept.
pub const MAX_ADMIN_CONNECTIONS: usize = 64;
/// A request head must arrive within this; a shard move's partition close and metastore
/// write fit well inside it too.
pub const ADMIN_REQUEST_TIMEOUT_MS: u64 = 30_000;
/// A whole admin exchange, a partition move's copy included, must finish within this.
pub const ADMIN_EXCHANGE_TIMEOUT_MS: u64 =
    ADMIN_REQUEST_TIMEOUT_MS + crate::partition_move::MOVE_TIMEOUT_MS;

pub async fn serve(state: Rc<CoreState>, listener: TcpListener) {
    let open = Rc::new(std::cell::Cell::new(0usize));
    loop {
        match listener.accept().await {
            Ok(stream) => {
                if open.get() >= MAX_ADMIN_CONNECTIONS {
                    tracing::debug!(
                        limit = MAX_ADMIN_CONNECTIONS,
                        "admin connection refused: too many open"
                    );
                    continue; // dropping the stream closes it
                }
                open.set(open.get() + 1);
                let (state, open) = (state.clone(), open.clone());
                glommio::spawn_local(async move {
                    let timeout = std::time::Duration::from_millis(ADMIN_EXCHANGE_TIMEOUT_MS);
                    match glommio::timer::timeout(timeout, async {
                        Ok(handle(&state, stream).await)
                    })
                    .await
                    {
                        Ok(Err(e)) => tracing::debug!(error = %e, "admin http connection"),
                        Err(_) => tracing::debug!(
                            timeout_ms = ADMIN_EXCHANGE_TIMEOUT_MS,
                            "admin http connection timed out"
                        ),
                        Ok(Ok(())) => {}
                    }
                    open.set(open.get() - 1);
                })
                .detach();
            }
            Err(e) => {
                tracing::warn!(error = %e, "admin accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

/// The request line of a head: method and target, read by `httparse`.
enum Head {
    Request {
        method: String,
        target: String,
    },
    /// The client closed, or sent no whole head in time: nothing to answer.
    Gone,
    /// Answer this status and reason, then close.
    Refused(u16, String),
}

/// Reads one request head: bounded in bytes (`MAX_REQUEST_HEAD_BYTES`), headers
/// (`MAX_REQUEST_HEADERS`) and time (`ADMIN_REQUEST_TIMEOUT_MS`).
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Head> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let head_by =
        std::time::Instant::now() + std::time::Duration::from_millis(ADMIN_REQUEST_TIMEOUT_MS);
    loop {
        let left = head_by.saturating_duration_since(std::time::Instant::now());
        let read = glommio::timer::timeout(left, async { Ok(stream.read(&mut buf).await) }).await;
        let n = match read {
            Ok(r) => r?,
            Err(_) => return Ok(Head::Gone), // no head within the limit: closed
        };
        if n == 0 {
            return Ok(Head::Gone);
        }
        head.extend_from_slice(&buf[..n]);
        let mut headers = [httparse::EMPTY_HEADER; MAX_REQUEST_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {
                return Ok(Head::Request {
                    method: req.method.unwrap_or_default().to_string(),
                    target: req.path.unwrap_or_default().to_string(),
                })
            }
            Ok(httparse::Status::Partial) if head.len() <= MAX_REQUEST_HEAD_BYTES => {}
            Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
                return Ok(Head::Refused(
                    431,
                    format!(
                        "request head too large (at most {MAX_REQUEST_HEAD_BYTES} bytes and {MAX_REQUEST_HEADERS} headers)\n"
                    ),
                ))
            }
            Err(e) => return Ok(Head::Refused(400, format!("malformed request head: {e}\n"))),
        }
    }
}

async fn handle(state: &Rc<CoreState>, mut stream: TcpStream) -> std::io::Result<()> {
    let (method, target) = match read_head(&mut stream).await? {
        Head::Request { method, target } => (method, target),
        Head::Gone => return Ok(()),
        Head::Refused(status, why) => {
            return respond(&mut stream, status, "text/plain", &why).await
        }
    };
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let decoded: Vec<(String, String)> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((percent_decode(k)?, percent_decode(v)?)))
        .collect();
    let params: HashMap<&str, &str> = decoded
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    match (method.as_str(), path) {
        ("GET", "/metrics") => {
            let body = metrics::render(&gather(state).await);
            respond(&mut stream, 200, metrics::EXPOSITION_CONTENT_TYPE, &body).await
        }
        ("GET", "/v1/shards") => {
            let parsed = (|| {
                let interval_ms: u64 = match params.get("interval_ms") {
                    None => DEFAULT_VIEW_INTERVAL_MS,
                    Some(_) => param(&params, "interval_ms")?,
                };
                let hot: usize = match params.get("hot") {
                    None => 0,
                    Some(_) => param(&params, "hot")?,
                };
                if interval_ms == 0 || interval_ms > shard_view::MAX_VIEW_INTERVAL_MS {
                    return Err(format!(
                        "interval_ms= is 1 to {}",
                        shard_view::MAX_VIEW_INTERVAL_MS
                    ));
                }
                Ok::<_, String>((interval_ms, hot))
            })();
            let (interval_ms, hot) = match parsed {
                Ok(p) => p,
                Err(e) => {
                    return respond(&mut stream, 400, "application/json", &json_error(&e)).await
                }
            };
            let t0 = std::time::Instant::now();
            let before = gather(state).await;
            glommio::timer::sleep(std::time::Duration::from_millis(interval_ms)).await;
            let after = gather(state).await;
            let v = shard_view::view(
                &before,
                &after,
                t0.elapsed().as_secs_f64(),
                hot,
                metrics::process_resident_bytes(),
            );
            respond(&mut stream, 200, "application/json", &json_line(&v)).await
        }
        ("POST", "/v1/shard-move") => {
            let parsed = (|| {
                let topic: String = param(&params, "topic")?;
                let partition: u32 = param(&params, "partition")?;
                let core: usize = param(&params, "core")?;
                Ok::<_, String>((topic, partition, core))
            })();
            let (topic, partition, core) = match parsed {
                Ok(p) => p,
                Err(e) => {
                    return respond(&mut stream, 400, "application/json", &json_error(&e)).await
                }
            };
            match crate::partition_move::move_to_core(state, &topic, partition, core).await {
                Ok(from) => {
                    let body = json_line(&serde_json::json!({
                        "topic": topic,
                        "partition": partition,
                        "from_core": from,
                        "to_core": core,
                    }));
                    respond(&mut stream, 200, "application/json", &body).await
                }
                Err((status, e)) => {
                    respond(&mut stream, status, "application/json", &json_error(&e)).await
                }
            }
        }
        ("POST", "/v1/partition-move") => {
            let parsed = (|| {
                let topic: String = param(&params, "topic")?;
                let partition: u32 = param(&params, "partition")?;
                let node: u64 = param(&params, "node")?;
                let core: Option<u32> = match params.get("core") {
                    None => None,
                    Some(_) => Some(param(&params, "core")?),
                };
                Ok::<_, String>((topic, partition, node, core))
            })();
            let (topic, partition, node, core) = match parsed {
                Ok(p) => p,
                Err(e) => {
                    return respond(&mut stream, 400, "application/json", &json_error(&e)).await
                }
            };
            match crate::partition_move::move_partition(state, &topic, partition, node, core).await
            {
                Ok(m) => {
                    let body = json_line(&serde_json::json!({
                        "topic": topic,
                        "partition": partition,
                        "from_node": m.from_node,
                        "from_core": m.from_core,
                        "to_node": m.to_node,
                        "to_core": m.to_core,
                        "copied_bytes": m.copied_bytes,
                        "handoff_ms": m.handoff_ms,
                    }));
                    respond(&mut stream, 200, "application/json", &body).await
                }
                Err((status, e)) => {
                    respond(&mut stream, status, "application/json", &json_error(&e)).await
                }
            }
        }
        // SCRAM users (issue #19), like Redpanda's admin API: the caller derives the
        // credential (salt and salted password, hex); the password never travels.
        ("POST", "/v1/scram-user") => {
            let parsed = (|| {
                let user = params.get("user").ok_or("missing user=")?.to_string();
                let mech = params
                    .get("mechanism")
                    .and_then(|m| {
                        [meta::ScramMechanism::Sha256, meta::ScramMechanism::Sha512]
                            .into_iter()
                            .find(|x| x.sasl_name() == *m)
                    })
                    .ok_or("mechanism= is SCRAM-SHA-256 or SCRAM-SHA-512")?;
                let iterations: u32 = params
                    .get("iterations")
                    .and_then(|i| i.parse().ok())
                    .filter(|i| {
                        (crate::sasl::scram::MIN_ITERATIONS..=crate::sasl::scram::MAX_ITERATIONS)
                            .contains(i)
                    })
                    .ok_or("iterations= is 4096 to 16384")?;
                let salt = params
                    .get("salt")
                    .and_then(|h| from_hex(h))
                    .ok_or("salt= is hex")?;
                let salted = params
                    .get("salted")
                    .and_then(|h| from_hex(h))
                    .ok_or("salted= is hex")?;
                if salt.is_empty() || salted.is_empty() {
                    return Err("salt= and salted= must not be empty");
                }
                Ok::<_, &str>(Command::UpsertScramCredential {
                    user,
                    mechanism: mech,
                    credential: Box::new(crate::sasl::scram::credential_of_salted(
                        mech, &salted, salt, iterations,
                    )),
                })
            })();
            match parsed {
                Err(e) => respond(&mut stream, 400, "application/json", &json_error(e)).await,
                Ok(cmd) => match crate::api::admin::write(state, cmd).await {
                    Ok(()) => {
                        respond(&mut stream, 200, "application/json", "{\"ok\":true}\n").await
                    }
                    Err((_, e)) => {
                        respond(&mut stream, 409, "application/json", &json_error(&e)).await
                    }
                },
            }
        }
        ("DELETE", "/v1/scram-user") => {
            let user = params.get("user").map(|u| u.to_string());
            let mechs: Vec<meta::ScramMechanism> = {
                let m = state.meta.borrow();
                let have = user.as_ref().and_then(|u| m.scram_users.get(u));
                [meta::ScramMechanism::Sha256, meta::ScramMechanism::Sha512]
                    .into_iter()
                    .filter(|x| params.get("mechanism").is_none_or(|n| *n == x.sasl_name()))
                    .filter(|x| have.is_some_and(|h| h.get(*x).is_some()))
                    .collect()
            };
            let Some(user) = user else {
                return respond(
                    &mut stream,
                    400,
                    "application/json",
                    &json_error("missing user="),
                )
                .await;
            };
            if mechs.is_empty() {
                let e = format!("user {user} has no such SCRAM credential");
                return respond(&mut stream, 404, "application/json", &json_error(&e)).await;
            }
            for mechanism in mechs {
                let cmd = Command::DeleteScramCredential {
                    user: user.clone(),
                    mechanism,
                };
                if let Err((_, e)) = crate::api::admin::write(state, cmd).await {
                    return respond(&mut stream, 409, "application/json", &json_error(&e)).await;
                }
            }
            respond(&mut stream, 200, "application/json", "{\"ok\":true}\n").await
        }
        ("GET", "/v1/scram-users") => {
            let body = {
                let m = state.meta.borrow();
                let users: Vec<serde_json::Value> = m
                    .scram_users
                    .iter()
                    .map(|(u, c)| {
                        let mechs: Vec<serde_json::Value> =
                            [meta::ScramMechanism::Sha256, meta::ScramMechanism::Sha512]
                                .into_iter()
                                .filter_map(|x| {
                                    c.get(x).map(|cr| {
                                        serde_json::json!({
                                            "mechanism": x.sasl_name(),
                                            "iterations": cr.iterations,
                                        })
                                    })
                                })
                                .collect();
                        serde_json::json!({"user": u, "credentials": mechs})
                    })
                    .collect();
                json_line(&serde_json::Value::from(users))
            };
            respond(&mut stream, 200, "application/json", &body).await
        }
        ("POST", "/v1/debug/disk-fault") => {
            let core: Option<usize> = params.get("core").and_then(|c| c.parse().ok());
            let op = params.get("op").copied().unwrap_or("");
            let (Some(core), true) = (core, matches!(op, "write" | "fdatasync" | "clear")) else {
                return respond(
                    &mut stream,
                    400,
                    "application/json",
                    &json_error("want core=N&op=write|fdatasync|clear"),
                )
                .await;
            };
            if core >= state.shards.cores() {
                return respond(
                    &mut stream,
                    400,
                    "application/json",
                    &json_error("no such core"),
                )
                .await;
            }
            let op = op.to_string();
            let armed = crate::route::on_core(state, core, move |s| async move {
                let Some(f) = &s.fault_injection.faults else {
                    return false;
                };
                match op.as_str() {
                    "write" => f.fail_write_after(1),
                    "fdatasync" => f.fail_sync_after(1),
                    _ => f.clear(),
                }
                true
            })
            .await
            .unwrap_or(false);
            if armed {
                respond(&mut stream, 200, "application/json", "{\"armed\":true}\n").await
            } else {
                respond(
                    &mut stream,
                    409,
                    "application/json",
                    &json_error("fault injection is off: start with --enable-fault-injection"),
                )
                .await
            }
        }
        ("POST", "/v1/debug/node-rpc-fault") => {
            // Tests and drills: this node's calls to node `peer` fail (`cut`) or go again
            // (`clear`), on every core: one side of a network partition.
            let peer: Option<u64> = params.get("peer").and_then(|c| c.parse().ok());
            let op = params.get("op").copied().unwrap_or("");
            let (Some(peer), true) = (peer, matches!(op, "cut" | "clear")) else {
                return respond(
                    &mut stream,
                    400,
                    "application/json",
                    &json_error("want peer=NODE_ID&op=cut|clear"),
                )
                .await;
            };
            if state.fault_injection.faults.is_none() {
                return respond(
                    &mut stream,
                    409,
                    "application/json",
                    &json_error("fault injection is off: start with --enable-fault-injection"),
                )
                .await;
            }
            let cut = op == "cut";
            for core in 0..state.shards.cores() {
                let _ = crate::route::on_core(state, core, move |s| async move {
                    let mut peers = s.fault_injection.node_rpc_cut.borrow_mut();
                    if cut {
                        peers.insert(peer);
                    } else {
                        peers.remove(&peer);
                    }
                })
                .await;
            }
            respond(&mut stream, 200, "application/json", "{\"armed\":true}\n").await
        }
        _ => {
            respond(
                &mut stream,
                404,
                "text/plain",
                "not found: GET /metrics, GET /v1/shards, POST /v1/shard-move, POST /v1/partition-move\n",
            )
            .await
        }
    }
}

/// Query parameter `key` as a `T`; the error names the parameter.
fn param<T: std::str::FromStr>(params: &HashMap<&str, &str>, key: &str) -> Result<T, String> {
    params
        .get(key)
        .ok_or_else(|| format!("missing {key}="))?
        .parse()
        .map_err(|_| format!("{key}= is not a number"))
}

/// A query-string value with its `%XX` escapes (and `+` for a space) decoded; `None` if an
/// escape is malformed or the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                out.push(u8::from_str_radix(s.get(i + 1..i + 3)?, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Bytes of a hex string; `None` if it is not hex.
fn from_hex(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `v` as one line of JSON.
fn json_line(v: &serde_json::Value) -> String {
    format!("{v}\n")
}

fn json_error(e: &str) -> String {
    json_line(&serde_json::json!({ "error": e }))
}

async fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        409 => "Conflict",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    let msg = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(msg.as_bytes()).await?;
    stream.close().await
}

/// Every core's snapshot, in core order.
pub async fn gather(state: &Rc<CoreState>) -> Vec<Snapshot> {
    let futs = (0..state.shards.cores()).map(|core| async move {
        crate::route::on_core(state, core, |s| async move { s.snapshot() })
            .await
            .unwrap_or_else(|_| Snapshot {
                core,
                ..Default::default()
            })
    });
    join_all(futs).await
}
