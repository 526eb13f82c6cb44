//! Node RPC (issue #17): what one node's cores ask of another node's, on the other node's
//! Kafka port. A frame is `i32 size | i16 NODE_RPC_API_KEY | i16 version | i32 correlation id |
//! rkyv(NodeRequest)`, answered `i32 size | i32 correlation id | rkyv(NodeResponse)`; the
//! rkyv bytes are validated before use (`meta::wire::decode`), and the frame is bounded like
//! any request (`max-request-bytes`, the core's request budget). Each core keeps its idle
//! connections to other nodes for the next call (`MAX_CACHED_NODE_CONNECTIONS`); a call holds
//! its connection alone.
//!
//! The calls: `AppendChild`, a fan-out cursor committing a batch to a child partition that
//! another node owns (seed 000: one RPC per child commit), and `HighWatermark`, a fan-out
//! attach reading the high watermark of a parent partition another node owns; a transaction
//! coordinator opening a transaction on, and writing its markers to, another node's
//! partition (`TxnBegin`, `TxnMarker`); and the calls of a partition move
//! (`crate::partition_move`). Nothing else is proxied: clients get
//! NOT_LEADER_OR_FOLLOWER for another node's partitions.
//!
//! Peer authentication (issue #19): with a cluster secret (`--cluster-secret-file`, the same
//! file on every node) each frame is version [`NODE_RPC_AUTH_VERSION`] and carries, after
//! the correlation id, an HMAC-SHA256 of the correlation id and the body under the secret;
//! a node with a secret closes the connection of a frame without a valid one (and of any
//! version-0 frame), before the body is decoded. Without a secret the API is open to any
//! client that reaches the port (the start logs a warning in cluster mode). The MAC proves
//! the sender holds the secret; it does not hide the frames or stop an on-path replay (the
//! nodes' network is the place for that).

use std::time::Duration;

use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use rkyv::{Archive, Deserialize, Serialize};

use crate::core::CoreState;

/// The private API key of node RPC frames (outside Kafka's range and the barrier APIs').
pub const NODE_RPC_API_KEY: i16 = 1_100;
/// The frame layout version without a cluster secret.
pub const NODE_RPC_VERSION: i16 = 0;
/// The frame layout version with a cluster secret: a MAC after the correlation id.
pub const NODE_RPC_AUTH_VERSION: i16 = 1;
/// The MAC's size (HMAC-SHA256).
pub const NODE_RPC_MAC_BYTES: usize = 32;
/// The shortest cluster secret, in bytes.
pub const MIN_CLUSTER_SECRET_BYTES: usize = 32;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

fn mac_of(secret: &[u8], correlation_id: i32, body: &[u8]) -> HmacSha256 {
    use hmac::Mac;
    let mut m = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any size");
    m.update(&correlation_id.to_be_bytes());
    m.update(body);
    m
}

/// The MAC a frame with `correlation_id` and `body` carries under `secret`.
pub fn mac(secret: &[u8], correlation_id: i32, body: &[u8]) -> [u8; NODE_RPC_MAC_BYTES] {
    use hmac::Mac;
    mac_of(secret, correlation_id, body)
        .finalize()
        .into_bytes()
        .into()
}

/// Whether a received frame passes peer authentication: no MAC where this node has no
/// secret, else a MAC that matches under it.
pub fn authentic(
    secret: Option<&[u8]>,
    correlation_id: i32,
    body: &[u8],
    tag: Option<&[u8]>,
) -> bool {
    match (secret, tag) {
        (None, None) => true,
        (Some(secret), Some(tag)) => mac_matches(secret, correlation_id, body, tag),
        _ => false,
    }
}

/// Whether `tag` is the frame's MAC under `secret` (compared in constant time).
pub fn mac_matches(secret: &[u8], correlation_id: i32, body: &[u8], tag: &[u8]) -> bool {
    use hmac::Mac;
    mac_of(secret, correlation_id, body)
        .verify_slice(tag)
        .is_ok()
}
/// How long one call (connect, send, the append, the answer) may take.
pub const NODE_RPC_TIMEOUT_MS: u64 = 10_000;
/// The largest answer a caller reads.
const MAX_NODE_RESPONSE_BYTES: usize = 64 * 1024;

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum NodeRequest {
    /// Append `batch` (a validated Kafka record batch) durably to `topic`/`partition`, which
    /// the receiving node owns.
    AppendChild {
        topic: String,
        partition: u32,
        batch: Vec<u8>,
    },
    /// The high watermark of `topic`/`partition`, which the receiving node owns (a fan-out
    /// attach reads every parent partition's).
    HighWatermark { topic: String, partition: u32 },
    /// Partition moves (`crate::partition_move`): the owner opens a staging directory on the
    /// receiving node for `topic`/`partition` of topic incarnation `incarnation`, ...
    MoveBegin {
        move_id: u64,
        topic: String,
        partition: u32,
        incarnation: String,
    },
    /// ... writes `bytes` at `offset` of staged file `file` (`last`: its final length, made
    /// durable), ...
    MoveChunk {
        move_id: u64,
        file: String,
        offset: u64,
        bytes: Vec<u8>,
        last: bool,
    },
    /// ... has it install the staged directory, which must hold exactly `files`, ...
    MoveCommit {
        move_id: u64,
        topic: String,
        partition: u32,
        files: Vec<MoveFile>,
    },
    /// ... or drop it (and an installed copy the receiving node does not serve).
    MoveAbort {
        move_id: u64,
        topic: String,
        partition: u32,
    },
    /// Open producer `producer_id`'s transaction at `epoch` on `topic`/`partition`, which
    /// the receiving node owns (AddPartitionsToTxn at a coordinator on another node).
    TxnBegin {
        topic: String,
        partition: u32,
        producer_id: i64,
        epoch: i16,
    },
    /// Write the commit (`commit`) or abort marker of producer `producer_id` at `epoch` to
    /// `topic`/`partition` (EndTxn or a timeout at a coordinator on another node).
    TxnMarker {
        topic: String,
        partition: u32,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    },
    /// Run a move of `topic`/`partition`, which the receiving node owns, to `node` (`core`,
    /// or its least loaded): a move asked of a node that does not own the partition.
    MovePartition {
        topic: String,
        partition: u32,
        node: u64,
        core: Option<u32>,
    },
    /// A barrier coordinator's marker for a partition of this node (seed 003): answered
    /// `MarkerWritten` once it is durable.
    BarrierMarker {
        topic: String,
        partition: u32,
        group: String,
        epoch: i64,
        triggered_at_ms: i64,
    },
    /// An earlier build's fetch of one partition, refused (`ReplicaFetchMany` replaced it;
    /// kept so that the variants after it keep their place).
    /// A follower's fetch from the leader of `topic`/`partition` (issue #18, `crate::replica`):
    /// `replica_node` holds everything below `fetch_offset` durably and follows leader epoch
    /// `leader_epoch`; answered `ReplicaRecords` (at most `max_bytes`, or one larger batch),
    /// after waiting up to `max_wait_ms` for records past `fetch_offset`.
    ReplicaFetch {
        topic: String,
        partition: u32,
        incarnation: String,
        replica_node: u64,
        leader_epoch: i32,
        fetch_offset: u64,
        max_bytes: u32,
        max_wait_ms: u32,
    },
    /// OffsetForLeaderEpoch: where leader epoch `epoch` ends on the leader of
    /// `topic`/`partition` (a follower about to truncate), at the leader's `leader_epoch`.
    LeaderEpochEnd {
        topic: String,
        partition: u32,
        leader_epoch: i32,
        epoch: i32,
    },
    /// One follower core's fetch of every partition it follows from core `leader_core` of
    /// the receiving node (`crate::replica_fetcher`; Kafka's replica fetcher): answered
    /// `ReplicaBatch`, one answer per partition in order, at most `max_bytes` in all (or one
    /// larger batch), after waiting up to `max_wait_ms` for records past any fetch offset.
    ReplicaFetchMany {
        replica_node: u64,
        leader_core: u32,
        max_bytes: u32,
        max_wait_ms: u32,
        partitions: Vec<ReplicaFetchPartition>,
    },
}

/// One partition of a `ReplicaFetchMany`: as a lone `ReplicaFetch` names it.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetchPartition {
    pub topic: String,
    pub partition: u32,
    pub incarnation: String,
    pub leader_epoch: i32,
    pub fetch_offset: u64,
    pub max_bytes: u32,
}

/// A leader's answer for one partition of a follower's fetch.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum ReplicaFetchAnswer {
    /// Stored batches from the fetch offset, and the leader's high watermark and log start.
    Records {
        bytes: Vec<u8>,
        high_watermark: u64,
        log_start: u64,
        /// The fan-out cursor files the leader's cursors of this partition stored (child,
        /// bytes): a follower keeps copies, so a cursor resumes near where it stood when its
        /// leader fails over.
        cursor_files: Vec<(String, Vec<u8>)>,
    },
    /// Not read this time: the answer's byte budget was spent on the partitions before it.
    Skipped,
    /// The fetch offset is past the leader's log end: the follower truncates again.
    Diverging {
        leader_end: u64,
    },
    /// The fetch offset is below the leader's log start: the follower starts over there.
    BelowLogStart {
        log_start: u64,
    },
    /// This replica is not the leader at that epoch (`current`: the epoch it has).
    NotLeader {
        current: Option<i32>,
    },
    /// The receiving core does not serve the partition (moved, deleted, not open).
    NotServed,
    Failed {
        reason: String,
    },
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum NodeResponse {
    Appended,
    HighWatermark(u64),
    /// A move call succeeded.
    Done,
    /// A transaction call's Kafka error code (`0`: done) and why.
    Code {
        code: i16,
        message: String,
    },
    /// A forwarded `MovePartition` finished.
    Moved {
        from_core: u32,
        to_core: u32,
        copied_bytes: u64,
        handoff_ms: u64,
    },
    /// The receiving node does not serve the partition (moved, deleted, not open).
    NotServed,
    Failed {
        reason: String,
    },
    /// A barrier marker is durable at this offset.
    MarkerWritten {
        offset: u64,
    },
    /// An earlier build's `ReplicaFetch` answer (no longer sent; kept so that the variants
    /// after it keep their place): stored batches from the fetch offset, and the leader's
    /// high watermark and log start.
    ReplicaRecords {
        bytes: Vec<u8>,
        high_watermark: u64,
        log_start: u64,
        /// The fan-out cursor files the leader's cursors of this partition stored (child,
        /// bytes): a follower keeps copies, so a cursor resumes near where it stood when its
        /// leader fails over (issue #18).
        cursor_files: Vec<(String, Vec<u8>)>,
    },
    /// A `LeaderEpochEnd` answer: the largest epoch at most the one asked for that the leader
    /// knows, and where it ends (`None`: it knows none that old).
    EpochEnd {
        epoch_end: Option<(i32, u64)>,
    },
    /// This replica is not the leader at that epoch (`current`: the epoch it has, if it has a
    /// replica): the asker waits for the metastore.
    NotLeader {
        current: Option<i32>,
    },
    /// The fetch offset is past the leader's log end: the follower truncates again.
    Diverging {
        leader_end: u64,
    },
    /// The fetch offset is below the leader's log start: the follower starts over there.
    BelowLogStart {
        log_start: u64,
    },
    /// A `ReplicaFetchMany` answer: one per partition, in the request's order.
    ReplicaBatch {
        answers: Vec<ReplicaFetchAnswer>,
    },
}

/// One file of a partition directory as a `MoveCommit` lists it.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MoveFile {
    pub name: String,
    pub len: u64,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("node {node_id} is not registered or is fenced")]
    NoNode { node_id: u64 },
    #[error("node {node_id} at {addr}: {what}")]
    Transport {
        node_id: u64,
        addr: String,
        what: String,
    },
}

/// The rkyv bytes of `resp`, for an answer frame.
pub fn encode_response(resp: &NodeResponse) -> Vec<u8> {
    match meta::wire::encode(resp) {
        Ok(b) => b.to_vec(),
        Err(e) => {
            tracing::error!(error = %e, "encoding a node RPC answer");
            Vec::new()
        }
    }
}

/// A call's frame: version 0, or with `secret` version 1 and the MAC.
pub fn request_frame(secret: Option<&[u8]>, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mac_bytes = if secret.is_some() {
        NODE_RPC_MAC_BYTES
    } else {
        0
    };
    let mut frame = Vec::with_capacity(12 + mac_bytes + body.len());
    frame.extend_from_slice(&((8 + mac_bytes + body.len()) as i32).to_be_bytes());
    frame.extend_from_slice(&NODE_RPC_API_KEY.to_be_bytes());
    let version = if secret.is_some() {
        NODE_RPC_AUTH_VERSION
    } else {
        NODE_RPC_VERSION
    };
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    if let Some(secret) = secret {
        frame.extend_from_slice(&mac(secret, correlation_id, body));
    }
    frame.extend_from_slice(body);
    frame
}

/// The frame of an answer to `correlation_id`.
pub fn response_frame(correlation_id: i32, body: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&((4 + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    out.extend_from_slice(body);
    Bytes::from(out)
}

/// Sends `req` to core `core`'s broker on node `node_id` (its registered endpoint) and
/// waits for the answer, within [`NODE_RPC_TIMEOUT_MS`].
pub async fn call(
    state: &CoreState,
    node_id: u64,
    core: u32,
    req: &NodeRequest,
) -> Result<NodeResponse, RpcError> {
    call_within(state, node_id, core, req, NODE_RPC_TIMEOUT_MS).await
}

/// [`call`] with its own limit (a forwarded partition move runs for as long as its copy).
pub async fn call_within(
    state: &CoreState,
    node_id: u64,
    core: u32,
    req: &NodeRequest,
    timeout_ms: u64,
) -> Result<NodeResponse, RpcError> {
    call_bounded(
        state,
        node_id,
        core,
        req,
        timeout_ms,
        MAX_NODE_RESPONSE_BYTES,
    )
    .await
}

/// [`call_within`] reading an answer of up to `max_response_bytes` (a follower's fetch).
pub async fn call_bounded(
    state: &CoreState,
    node_id: u64,
    core: u32,
    req: &NodeRequest,
    timeout_ms: u64,
    max_response_bytes: usize,
) -> Result<NodeResponse, RpcError> {
    if state
        .fault_injection
        .node_rpc_cut
        .borrow()
        .contains(&node_id)
    {
        return Err(RpcError::Transport {
            node_id,
            addr: String::new(),
            what: "cut by the fault injector (a simulated network partition)".into(),
        });
    }
    let endpoint = {
        let m = state.meta.borrow();
        state.cluster_brokers(&m).endpoint(meta::Assignment {
            node_id,
            core_index: core,
        })
    }
    .ok_or(RpcError::NoNode { node_id })?;
    let addr = format!("{}:{}", endpoint.host, endpoint.port);
    let fail = |what: String| RpcError::Transport {
        node_id,
        addr: addr.clone(),
        what,
    };
    let body = meta::wire::encode(req).map_err(|e| fail(e.to_string()))?;
    let frame = request_frame(state.ctx.config.cluster_secret.as_deref(), 1, &body);
    let exchange = async {
        // A connection this core used before for `addr` (at most one call at a time on it);
        // if it went stale (the peer restarted, or closed it idle), once more on a new one.
        if let Some(s) = take_cached(&addr) {
            if let Ok(resp) = exchange_on(s, &addr, &frame, max_response_bytes).await {
                return Ok(resp);
            }
        }
        let s = connect(&addr)
            .await
            .map_err(|e| fail(format!("connect: {e}")))?;
        exchange_on(s, &addr, &frame, max_response_bytes)
            .await
            .map_err(fail)
    };
    glommio::timer::timeout(Duration::from_millis(timeout_ms), async {
        Ok::<_, glommio::GlommioError<()>>(exchange.await)
    })
    .await
    .unwrap_or_else(|_| Err(fail(format!("no answer within {timeout_ms} ms"))))
}

/// Connections to other nodes one core keeps between calls, at most.
const MAX_CACHED_NODE_CONNECTIONS: usize = 64;

thread_local! {
    /// This core's idle connections to other nodes, by address (one executor per thread);
    /// several per address (each follower replica fetching from a node holds one per call).
    static CACHED: std::cell::RefCell<std::collections::HashMap<String, Vec<glommio::net::TcpStream>>> =
        Default::default();
}

fn take_cached(addr: &str) -> Option<glommio::net::TcpStream> {
    CACHED.with(|c| {
        let mut c = c.borrow_mut();
        let idle = c.get_mut(addr)?;
        let s = idle.pop();
        if idle.is_empty() {
            c.remove(addr);
        }
        s
    })
}

fn put_cached(addr: &str, s: glommio::net::TcpStream) {
    CACHED.with(|c| {
        let mut c = c.borrow_mut();
        let cached: usize = c.values().map(Vec::len).sum();
        if cached < MAX_CACHED_NODE_CONNECTIONS {
            c.entry(addr.to_string()).or_default().push(s);
        }
    });
}

/// A new connection to `addr`; a host name is resolved on the blocking pool (a DNS lookup
/// must not stall the core).
async fn connect(addr: &str) -> std::io::Result<glommio::net::TcpStream> {
    let target = match addr.parse::<std::net::SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            let name = addr.to_string();
            glommio::executor()
                .spawn_blocking(move || {
                    use std::net::ToSocketAddrs;
                    name.to_socket_addrs().map(|mut a| a.next())
                })
                .await?
                .ok_or_else(|| std::io::Error::other("the name resolves to no address"))?
        }
    };
    let s = glommio::net::TcpStream::connect(target)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// One call on `s`: the frame out, the answer in (at most `max_response_bytes`). The
/// connection goes back to the cache after a whole answer.
async fn exchange_on(
    mut s: glommio::net::TcpStream,
    addr: &str,
    frame: &[u8],
    max_response_bytes: usize,
) -> Result<NodeResponse, String> {
    s.write_all(frame).await.map_err(|e| format!("send: {e}"))?;
    let mut size = [0u8; 4];
    s.read_exact(&mut size)
        .await
        .map_err(|e| format!("answer size: {e}"))?;
    let size = i32::from_be_bytes(size);
    if !(4..=max_response_bytes.min(i32::MAX as usize) as i32).contains(&size) {
        return Err(format!("answer of {size} bytes"));
    }
    let mut answer = vec![0u8; size as usize];
    s.read_exact(&mut answer)
        .await
        .map_err(|e| format!("answer: {e}"))?;
    let resp = meta::wire::decode::<NodeResponse>(&answer[4..], "node answer")
        .map_err(|e| e.to_string())?;
    put_cached(addr, s);
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_round_trip_and_garbage_is_refused() {
        let req = NodeRequest::AppendChild {
            topic: "child".into(),
            partition: 3,
            batch: vec![1, 2, 3],
        };
        let bytes = meta::wire::encode(&req).unwrap();
        assert_eq!(meta::wire::decode::<NodeRequest>(&bytes, "t").unwrap(), req);
        assert!(meta::wire::decode::<NodeRequest>(&[0xff; 7], "t").is_err());
        let f = response_frame(9, b"abc");
        assert_eq!(&f[..], &[0, 0, 0, 7, 0, 0, 0, 9, b'a', b'b', b'c']);
    }

    /// With a secret a frame carries the MAC of its correlation id and body: the decoder
    /// hands it over, and it matches only the same secret, id and body.
    #[test]
    fn frames_with_a_secret_carry_their_mac() {
        let secret = [7u8; MIN_CLUSTER_SECRET_BYTES];
        let frame = request_frame(Some(&secret), 5, b"body");
        let decoded = crate::conn::decode_frame(bytes::Bytes::from(frame[4..].to_vec()), "p");
        let Ok(crate::conn::Decoded::NodeRpc {
            correlation_id,
            mac: Some(tag),
            body,
        }) = decoded
        else {
            panic!("not a node RPC frame with a MAC");
        };
        assert_eq!((correlation_id, &body[..]), (5, &b"body"[..]));
        assert!(mac_matches(&secret, 5, &body, &tag));
        assert!(!mac_matches(&secret, 6, &body, &tag));
        assert!(!mac_matches(&secret, 5, b"bodY", &tag));
        assert!(!mac_matches(
            &[8u8; MIN_CLUSTER_SECRET_BYTES],
            5,
            &body,
            &tag
        ));
        let plain = request_frame(None, 5, b"body");
        assert!(matches!(
            crate::conn::decode_frame(bytes::Bytes::from(plain[4..].to_vec()), "p"),
            Ok(crate::conn::Decoded::NodeRpc { mac: None, .. })
        ));
    }
}
