//! A small blocking TCP client of one metastore node (tests, the benchmark, later the broker
//! CLI). Frames and messages are those of [`crate::wire`].

use std::collections::BTreeMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::{MetaError, Result};
use crate::state::{AppliedChange, ApplyOutcome, Assignment, Command, MetaState};
use crate::wire::{self, ClientRequest, ClientResponse, NodeStatus, Request, Response};

/// Connect timeout of the client.
pub const CLIENT_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Read/write timeout of one client request; above the server's write and forward timeouts.
pub const CLIENT_REQUEST_TIMEOUT_MS: u64 = 20_000;
/// Adding a node waits for the learner to catch up.
pub const CLIENT_ADD_NODE_TIMEOUT_MS: u64 = 70_000;

pub struct MetaClient {
    addr: String,
    stream: Option<TcpStream>,
}

impl MetaClient {
    pub fn new(addr: impl Into<String>) -> MetaClient {
        MetaClient {
            addr: addr.into(),
            stream: None,
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn connect(&self) -> Result<TcpStream> {
        let ctx = || format!("connect to {}", self.addr);
        let sa = self
            .addr
            .to_socket_addrs()
            .map_err(|e| MetaError::io(ctx(), e))?
            .next()
            .ok_or_else(|| MetaError::Config {
                context: format!("address {} resolves to nothing", self.addr),
            })?;
        let s = TcpStream::connect_timeout(&sa, Duration::from_millis(CLIENT_CONNECT_TIMEOUT_MS))
            .map_err(|e| MetaError::io(ctx(), e))?;
        let _ = s.set_nodelay(true);
        Ok(s)
    }

    /// Sends one request, waiting at most `timeout_ms` for the answer.
    pub fn call(&mut self, req: ClientRequest, timeout_ms: u64) -> Result<ClientResponse> {
        let res = (|| {
            if self.stream.is_none() {
                self.stream = Some(self.connect()?);
            }
            let s = self.stream.as_mut().expect("connected");
            let t = Some(Duration::from_millis(timeout_ms));
            s.set_read_timeout(t)
                .and_then(|_| s.set_write_timeout(t))
                .map_err(|e| MetaError::io("set socket timeouts", e))?;
            let bytes = wire::encode(&Request::Client(req))?;
            wire::write_frame_blocking(s, &bytes)?;
            let payload = wire::read_frame_blocking(s)?;
            wire::decode::<Response>(&payload, "response")
        })();
        if res.is_err() {
            self.stream = None;
        }
        match res? {
            Response::Client(ClientResponse::Error(e)) => Err(e.into()),
            Response::Client(r) => Ok(r),
            other => Err(MetaError::Protocol {
                context: format!("non-client response {other:?}"),
            }),
        }
    }

    pub fn write(&mut self, cmd: Command) -> Result<AppliedChange> {
        let req = ClientRequest::Write {
            cmd,
            forwarded: false,
        };
        match self.call(req, CLIENT_REQUEST_TIMEOUT_MS)? {
            ClientResponse::Written(ApplyOutcome::Applied(c)) => Ok(c),
            ClientResponse::Written(ApplyOutcome::Refused(r)) => Err(MetaError::Refused(r)),
            other => Err(unexpected(other)),
        }
    }

    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: u32,
        configs: BTreeMap<String, String>,
        assignments: Vec<Assignment>,
    ) -> Result<AppliedChange> {
        self.write(Command::create_topic(
            name,
            partitions,
            configs,
            assignments,
        ))
    }

    /// The node's local applied state.
    pub fn state(&mut self) -> Result<(u64, MetaState)> {
        match self.call(ClientRequest::GetState, CLIENT_REQUEST_TIMEOUT_MS)? {
            ClientResponse::State {
                applied_index,
                state,
            } => Ok((applied_index, state)),
            other => Err(unexpected(other)),
        }
    }

    /// Leader-confirmed read (forwarded to the leader by a follower).
    pub fn linearizable_read(&mut self) -> Result<(u64, MetaState)> {
        let req = ClientRequest::LinearizableRead { forwarded: false };
        match self.call(req, CLIENT_REQUEST_TIMEOUT_MS)? {
            ClientResponse::State {
                applied_index,
                state,
            } => Ok((applied_index, state)),
            other => Err(unexpected(other)),
        }
    }

    /// A log index the leader confirmed with a quorum (forwarded to the leader by a follower):
    /// a copy applied up to it is as new as any acknowledged write before the call.
    pub fn read_index(&mut self) -> Result<u64> {
        let req = ClientRequest::ReadIndex { forwarded: false };
        match self.call(req, CLIENT_REQUEST_TIMEOUT_MS)? {
            ClientResponse::ReadIndex(index) => Ok(index),
            other => Err(unexpected(other)),
        }
    }

    pub fn status(&mut self) -> Result<NodeStatus> {
        match self.call(ClientRequest::Status, CLIENT_REQUEST_TIMEOUT_MS)? {
            ClientResponse::Status(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// Adds a node as learner and promotes it once caught up.
    pub fn add_node(&mut self, node_id: u64, addr: &str) -> Result<()> {
        let req = ClientRequest::AddNode {
            node_id,
            addr: addr.to_string(),
            forwarded: false,
        };
        match self.call(req, CLIENT_ADD_NODE_TIMEOUT_MS)? {
            ClientResponse::NodeAdded => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}

fn unexpected(r: ClientResponse) -> MetaError {
    MetaError::Protocol {
        context: format!("unexpected response {r:?}"),
    }
}
