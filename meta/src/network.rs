//! Raft RPC over TCP: one persistent connection per (local node, target) client, one request in
//! flight at a time, frames as described in [`crate::wire`].

use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, Timeout, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes, RaftNetwork, RaftNetworkFactory};
use tokio::net::TcpStream;

use crate::error::MetaError;
use crate::wire::{self, Request, Response, WAppendResponse, WEntry, WVote};
use crate::TypeConfig;

/// Connect timeout for node-to-node connections.
pub const CONNECT_TIMEOUT_MS: u64 = 1_000;

/// Sends one request on `stream` and reads the response.
pub async fn round_trip(stream: &mut TcpStream, req: &Request) -> Result<Response, MetaError> {
    let bytes = wire::encode(req)?;
    wire::write_frame(stream, &bytes).await?;
    let payload = wire::read_frame(stream)
        .await?
        .ok_or_else(|| MetaError::Protocol {
            context: "connection closed before the response".into(),
        })?;
    wire::decode::<Response>(&payload, "response")
}

pub async fn connect(addr: &str) -> Result<TcpStream, MetaError> {
    let s = tokio::time::timeout(
        Duration::from_millis(CONNECT_TIMEOUT_MS),
        TcpStream::connect(addr),
    )
    .await
    .map_err(|_| MetaError::Timeout {
        what: format!("connect to {addr}"),
        timeout_ms: CONNECT_TIMEOUT_MS,
    })?
    .map_err(|e| MetaError::io(format!("connect to {addr}"), e))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// One-shot request on a fresh connection, bounded by `timeout`.
pub async fn call(addr: &str, req: &Request, timeout: Duration) -> Result<Response, MetaError> {
    tokio::time::timeout(timeout, async {
        let mut s = connect(addr).await?;
        round_trip(&mut s, req).await
    })
    .await
    .map_err(|_| MetaError::Timeout {
        what: format!("request to {addr}"),
        timeout_ms: timeout.as_millis() as u64,
    })?
}

pub struct NetworkFactory {
    pub self_id: u64,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = NetClient;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> NetClient {
        NetClient {
            self_id: self.self_id,
            target,
            addr: node.addr.clone(),
            stream: None,
        }
    }
}

pub struct NetClient {
    self_id: u64,
    target: u64,
    addr: String,
    stream: Option<TcpStream>,
}

type RpcErr<E = openraft::error::Infallible> = RPCError<u64, BasicNode, RaftError<u64, E>>;

impl NetClient {
    async fn rpc<E: std::error::Error>(
        &mut self,
        req: Request,
        action: RPCTypes,
        option: &RPCOption,
    ) -> Result<Response, RpcErr<E>> {
        let ttl = option.hard_ttl();
        let fut = async {
            if self.stream.is_none() {
                let s = connect(&self.addr)
                    .await
                    .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
                self.stream = Some(s);
            }
            let s = self.stream.as_mut().expect("just connected");
            round_trip(s, &req)
                .await
                .map_err(|e| RPCError::Network(NetworkError::new(&e)))
        };
        let res = match tokio::time::timeout(ttl, fut).await {
            Ok(r) => r,
            Err(_) => Err(RPCError::Timeout(Timeout {
                action,
                id: self.self_id,
                target: self.target,
                timeout: ttl,
            })),
        };
        if res.is_err() {
            // The connection may hold a half-read frame: never reuse it.
            self.stream = None;
        }
        let resp = res?;
        if let Response::RaftError { kind, message } = &resp {
            let e = MetaError::Remote {
                message: format!("{kind:?}: {message}"),
            };
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        Ok(resp)
    }
}

fn unexpected<E: std::error::Error>(what: &str, resp: &Response) -> RpcErr<E> {
    let e = MetaError::Protocol {
        context: format!("unexpected response to {what}: {resp:?}"),
    };
    RPCError::Network(NetworkError::new(&e))
}

impl RaftNetwork<TypeConfig> for NetClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RpcErr> {
        let req = Request::AppendEntries {
            vote: (&rpc.vote).into(),
            prev_log_id: wire::to_wlog(&rpc.prev_log_id),
            entries: rpc.entries.iter().map(WEntry::from).collect(),
            leader_commit: wire::to_wlog(&rpc.leader_commit),
        };
        let resp = self.rpc(req, RPCTypes::AppendEntries, &option).await?;
        match resp {
            Response::AppendEntries(w) => Ok(match w {
                WAppendResponse::Success => AppendEntriesResponse::Success,
                WAppendResponse::PartialSuccess(l) => {
                    AppendEntriesResponse::PartialSuccess(wire::from_wlog(&l))
                }
                WAppendResponse::Conflict => AppendEntriesResponse::Conflict,
                WAppendResponse::HigherVote(v) => AppendEntriesResponse::HigherVote((&v).into()),
            }),
            other => Err(unexpected("append_entries", &other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RpcErr<InstallSnapshotError>> {
        let req = Request::InstallSnapshot {
            vote: (&rpc.vote).into(),
            meta: (&rpc.meta).into(),
            offset: rpc.offset,
            data: rpc.data,
            done: rpc.done,
        };
        let resp = self.rpc(req, RPCTypes::InstallSnapshot, &option).await?;
        match resp {
            Response::InstallSnapshot { vote } => Ok(InstallSnapshotResponse {
                vote: (&vote).into(),
            }),
            other => Err(unexpected("install_snapshot", &other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RpcErr> {
        let req = Request::Vote {
            vote: (&rpc.vote).into(),
            last_log_id: wire::to_wlog(&rpc.last_log_id),
        };
        let resp = self.rpc(req, RPCTypes::Vote, &option).await?;
        match resp {
            Response::Vote {
                vote,
                vote_granted,
                last_log_id,
            } => Ok(VoteResponse {
                vote: (&vote).into(),
                vote_granted,
                last_log_id: wire::from_wlog(&last_log_id),
            }),
            other => Err(unexpected("vote", &other)),
        }
    }
}

/// Converts a received AppendEntries request into openraft's type.
pub fn append_request(
    vote: &WVote,
    prev_log_id: &Option<wire::WLogId>,
    entries: Vec<WEntry>,
    leader_commit: &Option<wire::WLogId>,
) -> AppendEntriesRequest<TypeConfig> {
    AppendEntriesRequest {
        vote: vote.into(),
        prev_log_id: wire::from_wlog(prev_log_id),
        entries: entries.into_iter().map(wire::Entry::from).collect(),
        leader_commit: wire::from_wlog(leader_commit),
    }
}

pub fn append_response(r: AppendEntriesResponse<u64>) -> WAppendResponse {
    match r {
        AppendEntriesResponse::Success => WAppendResponse::Success,
        AppendEntriesResponse::PartialSuccess(l) => {
            WAppendResponse::PartialSuccess(wire::to_wlog(&l))
        }
        AppendEntriesResponse::Conflict => WAppendResponse::Conflict,
        AppendEntriesResponse::HigherVote(v) => WAppendResponse::HigherVote((&v).into()),
    }
}
