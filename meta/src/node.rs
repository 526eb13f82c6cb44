//! The metastore node: a dedicated thread with a current-thread tokio runtime running openraft,
//! the TCP server (raft RPC and client requests on one port), and [`MetaHandle`], the flume
//! front door other threads use.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, RaftError};
use openraft::raft::{InstallSnapshotRequest, VoteRequest};
use openraft::{BasicNode, ChangeMembers, SnapshotPolicy};
use tokio::net::{TcpListener, TcpStream};

use crate::error::{MetaError, Result};
use crate::liveness::LivenessTracker;
use crate::log_store::LogStore;
use crate::network::{self, NetworkFactory};
use crate::sm::StateMachineStore;
use crate::state::{AppliedChange, ApplyOutcome, Command, MetaState, Proposal};
use crate::wire::{
    self, ClientRequest, ClientResponse, NodeStatus, RaftErrorKind, Request, Response, WireError,
};
use crate::Raft;

pub const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 150;
pub const DEFAULT_ELECTION_TIMEOUT_MIN_MS: u64 = 750;
pub const DEFAULT_ELECTION_TIMEOUT_MAX_MS: u64 = 1_500;
/// Build a snapshot (and compact the log) after this many new log entries.
pub const DEFAULT_SNAPSHOT_EVERY_LOGS: u64 = 5_000;
/// Entries kept in the log after a snapshot (so followers that lag a little need no snapshot).
pub const DEFAULT_LOGS_KEPT_AFTER_SNAPSHOT: u64 = 1_000;
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1024 * 1024;
pub const INSTALL_SNAPSHOT_TIMEOUT_MS: u64 = 5_000;
/// How long a leader-confirmed read waits for the quorum before answering `Unconfirmed`.
pub const LINEARIZABLE_READ_TIMEOUT_MS: u64 = 2_000;
/// How long a write waits for commit before answering `Timeout` (outcome unknown).
pub const WRITE_TIMEOUT_MS: u64 = 10_000;
/// Timeout of one forwarded request to the leader.
pub const FORWARD_TIMEOUT_MS: u64 = 12_000;
/// How long adding a node may take (learner catch-up plus promotion).
pub const ADD_NODE_TIMEOUT_MS: u64 = 60_000;
pub const JOIN_RETRY_INTERVAL_MS: u64 = 500;
/// On the first start, initial members other than the lowest id initialise the cluster
/// themselves only if it is still uninitialised after this long.
pub const BOOTSTRAP_FALLBACK_MS: u64 = 5_000;
/// Most client writes proposed together as one raft log entry (group commit).
pub const MAX_COMMANDS_PER_PROPOSAL: usize = 1_024;
/// Soft cap on the estimated encoded bytes of one proposal ([`Command::approx_bytes`]), far
/// under [`crate::log_store::MAX_LOG_ENTRY_BYTES`]; a larger single command goes alone.
pub const MAX_PROPOSAL_BYTES: usize = 1024 * 1024;
/// Group-commit proposals handed to openraft at once.
pub const MAX_PROPOSALS_IN_FLIGHT: usize = 2;
/// Commands queued to the meta thread before senders wait.
pub const COMMAND_QUEUE_CAPACITY: usize = 4_096;
pub const ACCEPT_ERROR_BACKOFF_MS: u64 = 100;
pub const DATA_DIR_LOCK_FILE: &str = "LOCK";
/// A broker with no heartbeat applied for this long is fenced by the metastore leader
/// (Kafka's `broker.session.timeout.ms`).
pub const DEFAULT_BROKER_SESSION_TIMEOUT_MS: u64 = 9_000;
/// The fence loop looks this many times per session timeout.
const FENCE_CHECKS_PER_SESSION: u32 = 6;
pub const RAFT_DIR: &str = "raft";

/// How far this node's users applied the metastore's changes: each of a broker's cores
/// reports its applied log index; the watermark is the lowest. Other nodes ask for it
/// (`ClientRequest::WaitApplied`) before an admin change counts as done everywhere. With no
/// users registered (a metastore-only node) the state machine's own applied index counts.
#[derive(Clone, Debug, Default)]
pub struct AppliedWatermark {
    cores: Arc<Vec<std::sync::atomic::AtomicU64>>,
}

impl AppliedWatermark {
    pub fn new(cores: usize) -> Self {
        Self {
            cores: Arc::new((0..cores).map(|_| 0.into()).collect()),
        }
    }

    /// Core `core` applied everything up to `index`.
    pub fn report(&self, core: usize, index: u64) {
        if let Some(c) = self.cores.get(core) {
            c.fetch_max(index, std::sync::atomic::Ordering::Release);
        }
    }

    /// The lowest index every core applied; `None` with no cores.
    pub fn get(&self) -> Option<u64> {
        self.cores
            .iter()
            .map(|c| c.load(std::sync::atomic::Ordering::Acquire))
            .min()
    }
}

/// `MetaHandle::leader` while no leader is known (node ids start at 1).
const NO_LEADER: u64 = 0;

/// The longest a `WaitApplied` waits, whatever it asks for.
pub const MAX_WAIT_APPLIED_MS: u64 = 60_000;
/// How often a `WaitApplied` looks at the watermark.
const WAIT_APPLIED_POLL_MS: u64 = 2;

/// Configuration of one metastore node.
#[derive(Clone, Debug)]
pub struct MetaConfig {
    pub node_id: u64,
    pub data_dir: PathBuf,
    /// Address of the TCP server (raft RPC + client requests). `None`: embedded, no network
    /// (single node only).
    pub listen: Option<SocketAddr>,
    /// Address other nodes use to reach this one; defaults to the bound listen address.
    pub advertise: Option<String>,
    /// Initial members (node id -> address), including this node. Empty: single-node cluster.
    pub peers: BTreeMap<u64, String>,
    /// Address of an existing member to ask for admission (learner, then voter).
    pub join: Option<String>,
    pub heartbeat_interval_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    pub snapshot_every_logs: u64,
    pub logs_kept_after_snapshot: u64,
    /// The leader fences a registered broker silent for longer (issue #17); 0: never.
    pub broker_session_timeout_ms: u64,
    /// What a `WaitApplied` from another node waits for.
    pub applied: AppliedWatermark,
}

impl MetaConfig {
    /// The embedded default: a one-voter cluster in `data_dir`, no network.
    pub fn single_node(data_dir: impl Into<PathBuf>) -> MetaConfig {
        MetaConfig {
            node_id: 1,
            data_dir: data_dir.into(),
            listen: None,
            advertise: None,
            peers: BTreeMap::new(),
            join: None,
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_INTERVAL_MS,
            election_timeout_min_ms: DEFAULT_ELECTION_TIMEOUT_MIN_MS,
            election_timeout_max_ms: DEFAULT_ELECTION_TIMEOUT_MAX_MS,
            snapshot_every_logs: DEFAULT_SNAPSHOT_EVERY_LOGS,
            logs_kept_after_snapshot: DEFAULT_LOGS_KEPT_AFTER_SNAPSHOT,
            // One broker alone is never fenced: no fence loop unless a cluster asks for it.
            broker_session_timeout_ms: 0,
            applied: AppliedWatermark::default(),
        }
    }

    /// Parses `1=127.0.0.1:7001,2=127.0.0.1:7002`.
    pub fn parse_peers(s: &str) -> Result<BTreeMap<u64, String>> {
        let mut out = BTreeMap::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (id, addr) = part.split_once('=').ok_or_else(|| MetaError::Config {
                context: format!("peer '{part}' is not ID=HOST:PORT"),
            })?;
            let id: u64 = id.trim().parse().map_err(|_| MetaError::Config {
                context: format!("peer id '{id}' is not a number"),
            })?;
            let addr = addr.trim();
            if addr.parse::<SocketAddr>().is_err() && !addr.contains(':') {
                return Err(MetaError::Config {
                    context: format!("peer address '{addr}' is not HOST:PORT"),
                });
            }
            if out.insert(id, addr.to_string()).is_some() {
                return Err(MetaError::Config {
                    context: format!("peer id {id} given twice"),
                });
            }
        }
        Ok(out)
    }

    fn validate(&self) -> Result<()> {
        let bad = |c: String| Err(MetaError::Config { context: c });
        if self.listen.is_none() && (!self.peers.is_empty() || self.join.is_some()) {
            return bad("cluster mode (peers/join) needs a listen address".into());
        }
        if !self.peers.is_empty() && !self.peers.contains_key(&self.node_id) && self.join.is_none()
        {
            return bad(format!(
                "node id {} is not among the peers and no join address was given",
                self.node_id
            ));
        }
        if self.election_timeout_min_ms <= self.heartbeat_interval_ms
            || self.election_timeout_max_ms <= self.election_timeout_min_ms
        {
            return bad("need heartbeat < election_timeout_min < election_timeout_max".into());
        }
        Ok(())
    }
}

type Reply<T> = flume::Sender<Result<T>>;

enum Cmd {
    Write(Command, Reply<AppliedChange>),
    Read(Reply<(u64, MetaState)>),
    LinearizableRead(Reply<(u64, MetaState)>),
    ReadIndex(Reply<u64>),
    Subscribe(Reply<(u64, MetaState, flume::Receiver<AppliedChange>)>),
    Status(Reply<NodeStatus>),
    AddNode {
        node_id: u64,
        addr: String,
        reply: Reply<()>,
    },
    WaitNodesApplied {
        index: u64,
        nodes: Vec<u64>,
        timeout_ms: u64,
        reply: Reply<()>,
    },
    Shutdown(Reply<()>),
}

/// Starts metastore nodes.
pub struct Metastore;

impl Metastore {
    /// Opens the data dir, recovers log and snapshot, starts raft on a dedicated thread and
    /// returns once the node runs (bootstrapping a new cluster on the first start).
    pub fn start(config: MetaConfig) -> Result<MetaHandle> {
        config.validate()?;
        let (tx, rx) = flume::bounded(COMMAND_QUEUE_CAPACITY);
        let (ready_tx, ready_rx) = flume::bounded(1);
        let node_id = config.node_id;
        let leader = Arc::new(std::sync::atomic::AtomicU64::new(NO_LEADER));
        let leader_seen = leader.clone();
        let thread = std::thread::Builder::new()
            .name(format!("ringlog-meta-{node_id}"))
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(MetaError::io("building tokio runtime", e)));
                        return;
                    }
                };
                let lock = rt.block_on(run(config, rx, ready_tx, leader_seen));
                // Dropping the runtime drops raft and the log store, which joins the log
                // writer (everything queued reaches the disk); only then release the data dir.
                drop(rt);
                drop(lock);
            })
            .map_err(|e| MetaError::io("spawning the meta thread", e))?;
        match ready_rx.recv() {
            Ok(Ok(listen_addr)) => Ok(MetaHandle {
                tx,
                node_id,
                listen_addr,
                leader,
                thread: Arc::new(std::sync::Mutex::new(Some(thread))),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(MetaError::Raft {
                    context: "meta thread exited during start".into(),
                })
            }
        }
    }
}

/// The handle other threads use. Clone + Send; every method sends a command over flume and
/// waits for the reply (async: `recv_async`, usable from any executor; or blocking).
#[derive(Clone)]
pub struct MetaHandle {
    tx: flume::Sender<Cmd>,
    node_id: u64,
    listen_addr: Option<SocketAddr>,
    /// The raft leader as this node last saw it ([`NO_LEADER`]: none), kept current by the
    /// meta thread; read without a round trip (Metadata names it the controller).
    leader: Arc<std::sync::atomic::AtomicU64>,
    thread: Arc<std::sync::Mutex<Option<std::thread::JoinHandle<()>>>>,
}

impl MetaHandle {
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The metastore leader's node id as this node last saw it; `None` while there is none.
    pub fn leader_id(&self) -> Option<u64> {
        match self.leader.load(std::sync::atomic::Ordering::Relaxed) {
            NO_LEADER => None,
            id => Some(id),
        }
    }

    /// The bound address of the TCP server, if any.
    pub fn listen_addr(&self) -> Option<SocketAddr> {
        self.listen_addr
    }

    fn send<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Result<flume::Receiver<Result<T>>> {
        let (tx, rx) = flume::bounded(1);
        self.tx.send(make(tx)).map_err(|_| MetaError::Stopped)?;
        Ok(rx)
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Result<T> {
        let (tx, rx) = flume::bounded(1);
        // Asked from the cores' executors, answered from the metastore thread: see `crosswake`.
        crosswake::home_wake(async {
            self.tx
                .send_async(make(tx))
                .await
                .map_err(|_| MetaError::Stopped)?;
            rx.recv_async().await.map_err(|_| MetaError::Stopped)?
        })
        .await
    }

    fn ask_blocking<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Result<T> {
        self.send(make)?.recv().map_err(|_| MetaError::Stopped)?
    }

    /// Proposes a command; on a follower it is forwarded to the leader (one hop).
    pub async fn write(&self, cmd: Command) -> Result<AppliedChange> {
        self.ask(|r| Cmd::Write(cmd, r)).await
    }
    pub fn write_blocking(&self, cmd: Command) -> Result<AppliedChange> {
        self.ask_blocking(|r| Cmd::Write(cmd, r))
    }

    /// This node's applied state (may lag the leader on a follower).
    pub async fn read(&self) -> Result<(u64, MetaState)> {
        self.ask(Cmd::Read).await
    }
    pub fn read_blocking(&self) -> Result<(u64, MetaState)> {
        self.ask_blocking(Cmd::Read)
    }

    /// A copy of the current state and a receiver of every change applied after it, in order.
    pub async fn subscribe(&self) -> Result<(u64, MetaState, flume::Receiver<AppliedChange>)> {
        self.ask(Cmd::Subscribe).await
    }
    pub fn subscribe_blocking(&self) -> Result<(u64, MetaState, flume::Receiver<AppliedChange>)> {
        self.ask_blocking(Cmd::Subscribe)
    }

    /// Leader-confirmed read (openraft `ensure_linearizable`): the state as of a log index the
    /// current leader confirmed with a quorum. On a follower the read is forwarded to the leader.
    /// `Unconfirmed` / `NotController` mean: defer and retry; never act on local state then.
    pub async fn linearizable_read(&self) -> Result<(u64, MetaState)> {
        self.ask(Cmd::LinearizableRead).await
    }
    pub fn linearizable_read_blocking(&self) -> Result<(u64, MetaState)> {
        self.ask_blocking(Cmd::LinearizableRead)
    }

    /// A log index the current leader confirmed with a quorum (the read-index protocol):
    /// a core may act on its own copy of the state once it has applied up to it. Only the
    /// index crosses the network.
    pub async fn ensure_linearizable(&self) -> Result<u64> {
        self.ask(Cmd::ReadIndex).await
    }
    pub fn ensure_linearizable_blocking(&self) -> Result<u64> {
        self.ask_blocking(Cmd::ReadIndex)
    }

    pub async fn status(&self) -> Result<NodeStatus> {
        self.ask(Cmd::Status).await
    }
    pub fn status_blocking(&self) -> Result<NodeStatus> {
        self.ask_blocking(Cmd::Status)
    }

    /// Adds a node: learner first, promoted to voter once caught up.
    /// Waits until the users (brokers' cores) of each of `nodes` applied every change up to
    /// `index`, asking each node's metastore; an error names the first node that did not
    /// within `timeout_ms` (or could not be asked).
    pub async fn wait_nodes_applied(
        &self,
        index: u64,
        nodes: Vec<u64>,
        timeout_ms: u64,
    ) -> Result<()> {
        self.ask(|reply| Cmd::WaitNodesApplied {
            index,
            nodes,
            timeout_ms,
            reply,
        })
        .await
    }

    pub async fn add_node(&self, node_id: u64, addr: String) -> Result<()> {
        self.ask(|reply| Cmd::AddNode {
            node_id,
            addr,
            reply,
        })
        .await
    }
    pub fn add_node_blocking(&self, node_id: u64, addr: String) -> Result<()> {
        self.ask_blocking(|reply| Cmd::AddNode {
            node_id,
            addr,
            reply,
        })
    }

    /// Stops raft and the thread (blocking). Other clones then get `Stopped`.
    pub fn shutdown(&self) -> Result<()> {
        let r = self.ask_blocking(Cmd::Shutdown);
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
        match r {
            Err(MetaError::Stopped) => Ok(()),
            other => other,
        }
    }
}

struct Node {
    id: u64,
    raft: Raft,
    sm: StateMachineStore,
    applied: AppliedWatermark,
    /// Writes to propose, taken in groups by [`propose_loop`].
    proposer: flume::Sender<PendingWrite>,
}

/// A write waiting to be proposed.
struct PendingWrite {
    cmd: Command,
    reply: tokio::sync::oneshot::Sender<std::result::Result<ApplyOutcome, ProposeError>>,
}

enum ProposeError {
    /// Not the leader; the command comes back for forwarding.
    Forward(ForwardToLeader<u64, BasicNode>, Command),
    Failed(String),
}

/// Group commit of client writes.
///
/// openraft 0.9 appends each `client_write` as its own log entry, and its core awaits the
/// flush of every append (`append_to_log` waits on the `LogFlushed` callback) before it takes
/// the next request: concurrent `client_write`s are serialised at one fdatasync each, so the log
/// writer's own group commit never sees more than one append. Instead, writes queue here and
/// every proposal is one raft entry carrying all the writes that queued up meanwhile (at most
/// [`MAX_COMMANDS_PER_PROPOSAL`] and about [`MAX_PROPOSAL_BYTES`]); at most
/// [`MAX_PROPOSALS_IN_FLIGHT`] proposals are in openraft at once, so that while one is being
/// made durable the next one collects writers.
async fn propose_loop(raft: Raft, rx: flume::Receiver<PendingWrite>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_PROPOSALS_IN_FLIGHT));
    let mut carry: Option<PendingWrite> = None;
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let first = match carry.take() {
            Some(w) => w,
            None => match rx.recv_async().await {
                Ok(w) => w,
                Err(_) => return,
            },
        };
        let mut bytes = first.cmd.approx_bytes();
        let mut batch = vec![first];
        while batch.len() < MAX_COMMANDS_PER_PROPOSAL {
            let Ok(w) = rx.try_recv() else { break };
            let b = w.cmd.approx_bytes();
            if bytes + b > MAX_PROPOSAL_BYTES {
                carry = Some(w);
                break;
            }
            bytes += b;
            batch.push(w);
        }
        let raft = raft.clone();
        tokio::spawn(async move {
            propose(&raft, batch).await;
            drop(permit);
        });
    }
}

/// Proposes `batch` as one raft entry and answers every write in it.
async fn propose(raft: &Raft, batch: Vec<PendingWrite>) {
    let (commands, replies): (Vec<Command>, Vec<_>) =
        batch.into_iter().map(|w| (w.cmd, w.reply)).unzip();
    let n = commands.len();
    // Kept for forwarding if this node turns out not to be the leader (openraft drops the
    // proposal then).
    let proposal = Proposal {
        commands: commands.clone(),
    };
    match raft.client_write(proposal).await {
        Ok(resp) if resp.data.len() == n => {
            for (reply, outcome) in replies.into_iter().zip(resp.data) {
                let _ = reply.send(Ok(outcome));
            }
        }
        Ok(resp) => {
            let why = format!("{n} commands applied with {} outcomes", resp.data.len());
            tracing::error!("{why}");
            for reply in replies {
                let _ = reply.send(Err(ProposeError::Failed(why.clone())));
            }
        }
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
            // Nothing was appended: hand every command back for forwarding.
            for (reply, cmd) in replies.into_iter().zip(commands) {
                let _ = reply.send(Err(ProposeError::Forward(f.clone(), cmd)));
            }
        }
        Err(e) => {
            let why = format!("client_write: {e}");
            for reply in replies {
                let _ = reply.send(Err(ProposeError::Failed(why.clone())));
            }
        }
    }
}

fn not_controller(f: &ForwardToLeader<u64, BasicNode>) -> MetaError {
    MetaError::NotController {
        leader_id: f.leader_id,
        leader_addr: f.leader_node.as_ref().map(|n| n.addr.clone()),
    }
}

impl Node {
    async fn forward(
        &self,
        f: &ForwardToLeader<u64, BasicNode>,
        req: ClientRequest,
    ) -> Result<ClientResponse> {
        let Some(addr) = f.leader_node.as_ref().map(|n| n.addr.clone()) else {
            return Err(not_controller(f));
        };
        if f.leader_id == Some(self.id) {
            return Err(not_controller(f));
        }
        match network::call(
            &addr,
            &Request::Client(req),
            Duration::from_millis(FORWARD_TIMEOUT_MS),
        )
        .await
        {
            Ok(Response::Client(ClientResponse::Error(w))) => Err(w.into()),
            Ok(Response::Client(r)) => Ok(r),
            Ok(other) => Err(MetaError::Protocol {
                context: format!("leader answered a client request with {other:?}"),
            }),
            Err(e) => {
                tracing::debug!(leader = %addr, error = %e, "forward to leader failed");
                Err(not_controller(f))
            }
        }
    }

    /// Proposes `cmd` through the group-commit proposer (see [`propose_loop`]); on a follower,
    /// forwards it to the leader unless it was forwarded already.
    async fn write(&self, cmd: Command, forwarded: bool) -> Result<AppliedChange> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.proposer
            .send(PendingWrite { cmd, reply: tx })
            .map_err(|_| MetaError::Stopped)?;
        let res = tokio::time::timeout(Duration::from_millis(WRITE_TIMEOUT_MS), rx)
            .await
            .map_err(|_| MetaError::Timeout {
                what: "raft write (outcome unknown)".into(),
                timeout_ms: WRITE_TIMEOUT_MS,
            })?
            .map_err(|_| MetaError::Stopped)?;
        match res {
            Ok(ApplyOutcome::Applied(c)) => Ok(c),
            Ok(ApplyOutcome::Refused(r)) => Err(MetaError::Refused(r)),
            Ok(ApplyOutcome::NoOp) => Err(MetaError::raft("normal entry applied as no-op")),
            Err(ProposeError::Forward(f, cmd)) => {
                if forwarded {
                    return Err(not_controller(&f));
                }
                match self
                    .forward(
                        &f,
                        ClientRequest::Write {
                            cmd,
                            forwarded: true,
                        },
                    )
                    .await?
                {
                    ClientResponse::Written(ApplyOutcome::Applied(c)) => Ok(c),
                    ClientResponse::Written(ApplyOutcome::Refused(r)) => Err(MetaError::Refused(r)),
                    other => Err(MetaError::Protocol {
                        context: format!("unexpected forwarded write answer {other:?}"),
                    }),
                }
            }
            Err(ProposeError::Failed(context)) => Err(MetaError::Raft { context }),
        }
    }

    async fn linearizable_read(&self, forwarded: bool) -> Result<(u64, MetaState)> {
        self.confirmed(
            forwarded,
            |node| Ok(node.sm.read()),
            ClientRequest::LinearizableRead { forwarded: true },
            |answer| match answer {
                ClientResponse::State {
                    applied_index,
                    state,
                } => Some((applied_index, state)),
                _ => None,
            },
        )
        .await
    }

    /// A log index the current leader confirmed with a quorum (the read-index protocol):
    /// whoever acts on its own copy of the state must first have applied up to it. Unlike
    /// [`Self::linearizable_read`] nothing but the index crosses the network.
    async fn read_index(&self, forwarded: bool) -> Result<u64> {
        self.confirmed(
            forwarded,
            |node| Ok(node.sm.read_index()),
            ClientRequest::ReadIndex { forwarded: true },
            |answer| match answer {
                ClientResponse::ReadIndex(index) => Some(index),
                _ => None,
            },
        )
        .await
    }

    /// Runs `local` once openraft's `ensure_linearizable` confirms this node leads (the
    /// barrier rule: a leader confirms with a quorum too, never trusting its own term); on a
    /// follower, asks the leader once with `ask` and reads its answer with `answer`.
    async fn confirmed<T>(
        &self,
        forwarded: bool,
        local: impl FnOnce(&Self) -> Result<T>,
        ask: ClientRequest,
        answer: impl FnOnce(ClientResponse) -> Option<T>,
    ) -> Result<T> {
        let res = tokio::time::timeout(
            Duration::from_millis(LINEARIZABLE_READ_TIMEOUT_MS),
            self.raft.ensure_linearizable(),
        )
        .await;
        match res {
            Err(_) => Err(MetaError::Unconfirmed {
                reason: format!("no quorum confirmation within {LINEARIZABLE_READ_TIMEOUT_MS} ms"),
            }),
            Ok(Ok(read_log_id)) => {
                let applied = self.sm.read_index();
                let need = read_log_id.map(|l| l.index).unwrap_or(0);
                assert!(
                    applied >= need,
                    "ensure_linearizable returned before applying {need} (applied {applied})"
                );
                local(self)
            }
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => {
                if forwarded {
                    return Err(not_controller(&f));
                }
                match self.forward(&f, ask).await {
                    Ok(a) => answer(a).ok_or_else(|| MetaError::Protocol {
                        context: "unexpected answer to a forwarded read".into(),
                    }),
                    Err(MetaError::NotController { .. }) => Err(MetaError::Unconfirmed {
                        reason: format!(
                            "not the leader, and leader {:?} could not confirm",
                            f.leader_id
                        ),
                    }),
                    Err(e) => Err(e),
                }
            }
            Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(q)))) => {
                Err(MetaError::Unconfirmed {
                    reason: q.to_string(),
                })
            }
            Ok(Err(e)) => Err(MetaError::Unconfirmed {
                reason: e.to_string(),
            }),
        }
    }

    fn status(&self) -> NodeStatus {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        NodeStatus {
            node_id: m.id,
            server_state: format!("{:?}", m.state),
            current_term: m.current_term,
            current_leader: m.current_leader,
            last_log_index: m.last_log_index,
            last_applied_index: m.last_applied.map(|l| l.index),
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index),
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
            nodes: membership
                .nodes()
                .map(|(id, n)| (*id, n.addr.clone()))
                .collect(),
        }
    }

    async fn add_node(&self, node_id: u64, addr: String, forwarded: bool) -> Result<()> {
        let fut = async {
            if self.status().voters.contains(&node_id) {
                return Ok(());
            }
            let fwd_req = ClientRequest::AddNode {
                node_id,
                addr: addr.clone(),
                forwarded: true,
            };
            let fwd = |f: ForwardToLeader<u64, BasicNode>| {
                let req = fwd_req.clone();
                async move {
                    if forwarded {
                        return Err(not_controller(&f));
                    }
                    self.forward(&f, req).await.map(|_| ())
                }
            };
            tracing::info!(node_id, %addr, "adding node as learner");
            match self
                .raft
                .add_learner(node_id, BasicNode::new(&addr), true)
                .await
            {
                Ok(_) => {}
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                    return fwd(f).await
                }
                Err(e) => return Err(MetaError::raft(format!("add_learner: {e}"))),
            }
            tracing::info!(node_id, "learner caught up, promoting to voter");
            match self
                .raft
                .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([node_id])), false)
                .await
            {
                Ok(_) => Ok(()),
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => fwd(f).await,
                Err(e) => Err(MetaError::raft(format!("change_membership: {e}"))),
            }
        };
        tokio::time::timeout(Duration::from_millis(ADD_NODE_TIMEOUT_MS), fut)
            .await
            .map_err(|_| MetaError::Timeout {
                what: format!("adding node {node_id}"),
                timeout_ms: ADD_NODE_TIMEOUT_MS,
            })?
    }

    /// Waits until this node's users applied `index` (see [`AppliedWatermark`]).
    async fn wait_applied(&self, index: u64, timeout_ms: u64) -> Result<()> {
        // The wait is the asker's to choose, within a bound (it holds a task here).
        let timeout_ms = timeout_ms.min(MAX_WAIT_APPLIED_MS);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
        loop {
            let applied = self.applied.get().unwrap_or_else(|| self.sm.read_index());
            if applied >= index {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(MetaError::Timeout {
                    what: format!("node {} applying index {index} (at {applied})", self.id),
                    timeout_ms,
                });
            }
            tokio::time::sleep(Duration::from_millis(WAIT_APPLIED_POLL_MS)).await;
        }
    }

    /// Asks each of `nodes` (by its raft address) to wait until it applied `index`.
    async fn wait_nodes_applied(&self, index: u64, nodes: Vec<u64>, timeout_ms: u64) -> Result<()> {
        let addrs = self.status().nodes;
        let asks = nodes.into_iter().map(|n| {
            let addr = addrs
                .iter()
                .find(|(id, _)| *id == n)
                .map(|(_, a)| a.clone());
            async move {
                let addr = addr.ok_or_else(|| MetaError::Config {
                    context: format!("node {n} is not a metastore member"),
                })?;
                let req = Request::Client(ClientRequest::WaitApplied { index, timeout_ms });
                // The call's own limit: the wait plus a margin for the round trip.
                let limit = Duration::from_millis(timeout_ms.saturating_add(FORWARD_TIMEOUT_MS));
                match network::call(&addr, &req, limit).await {
                    Ok(Response::Client(ClientResponse::Applied)) => Ok(()),
                    Ok(Response::Client(ClientResponse::Error(w))) => Err(MetaError::from(w)),
                    Ok(other) => Err(MetaError::Protocol {
                        context: format!("node {n} answered WaitApplied with {other:?}"),
                    }),
                    Err(e) => Err(e),
                }
            }
        });
        // Asked at once, each on a task of its own.
        let handles: Vec<_> = asks.map(tokio::spawn).collect();
        for h in handles {
            h.await
                .map_err(|e| MetaError::raft(format!("WaitApplied task: {e}")))??;
        }
        Ok(())
    }

    async fn handle_client(&self, req: ClientRequest) -> ClientResponse {
        let res = match req {
            ClientRequest::Write { cmd, forwarded } => self
                .write(cmd, forwarded)
                .await
                .map(|c| ClientResponse::Written(ApplyOutcome::Applied(c))),
            ClientRequest::GetState => {
                let (applied_index, state) = self.sm.read();
                Ok(ClientResponse::State {
                    applied_index,
                    state,
                })
            }
            ClientRequest::LinearizableRead { forwarded } => self
                .linearizable_read(forwarded)
                .await
                .map(|(applied_index, state)| ClientResponse::State {
                    applied_index,
                    state,
                }),
            ClientRequest::ReadIndex { forwarded } => self
                .read_index(forwarded)
                .await
                .map(ClientResponse::ReadIndex),
            ClientRequest::Status => Ok(ClientResponse::Status(self.status())),
            ClientRequest::WaitApplied { index, timeout_ms } => self
                .wait_applied(index, timeout_ms)
                .await
                .map(|_| ClientResponse::Applied),
            ClientRequest::AddNode {
                node_id,
                addr,
                forwarded,
            } => self
                .add_node(node_id, addr, forwarded)
                .await
                .map(|_| ClientResponse::NodeAdded),
        };
        match res {
            Ok(r) => r,
            Err(MetaError::Refused(r)) => ClientResponse::Written(ApplyOutcome::Refused(r)),
            Err(e) => ClientResponse::Error(WireError::from(&e)),
        }
    }

    async fn handle(&self, req: Request) -> Response {
        match req {
            Request::AppendEntries {
                vote,
                prev_log_id,
                entries,
                leader_commit,
            } => {
                let rpc = network::append_request(&vote, &prev_log_id, entries, &leader_commit);
                match self.raft.append_entries(rpc).await {
                    Ok(r) => Response::AppendEntries(network::append_response(r)),
                    Err(e) => Response::RaftError {
                        kind: RaftErrorKind::Fatal,
                        message: e.to_string(),
                    },
                }
            }
            Request::Vote { vote, last_log_id } => {
                let rpc = VoteRequest {
                    vote: (&vote).into(),
                    last_log_id: wire::from_wlog(&last_log_id),
                };
                match self.raft.vote(rpc).await {
                    Ok(r) => Response::Vote {
                        vote: (&r.vote).into(),
                        vote_granted: r.vote_granted,
                        last_log_id: wire::to_wlog(&r.last_log_id),
                    },
                    Err(e) => Response::RaftError {
                        kind: RaftErrorKind::Fatal,
                        message: e.to_string(),
                    },
                }
            }
            Request::InstallSnapshot {
                vote,
                meta,
                offset,
                data,
                done,
            } => {
                let rpc = InstallSnapshotRequest {
                    vote: (&vote).into(),
                    meta: (&meta).into(),
                    offset,
                    data,
                    done,
                };
                match self.raft.install_snapshot(rpc).await {
                    Ok(r) => Response::InstallSnapshot {
                        vote: (&r.vote).into(),
                    },
                    Err(e) => Response::RaftError {
                        kind: match e {
                            RaftError::APIError(_) => RaftErrorKind::SnapshotMismatch,
                            RaftError::Fatal(_) => RaftErrorKind::Fatal,
                        },
                        message: e.to_string(),
                    },
                }
            }
            Request::Client(c) => Response::Client(self.handle_client(c).await),
        }
    }
}

async fn serve_conn(mut stream: TcpStream, peer: SocketAddr, node: Arc<Node>) {
    let _ = stream.set_nodelay(true);
    loop {
        let payload = match wire::read_frame(&mut stream).await {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "closing connection");
                return;
            }
        };
        let req = match wire::decode::<Request>(&payload, "request") {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "malformed request, closing connection");
                return;
            }
        };
        let resp = node.handle(req).await;
        let bytes = match wire::encode(&resp) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(%peer, error = %e, "cannot encode response");
                return;
            }
        };
        if let Err(e) = wire::write_frame(&mut stream, &bytes).await {
            tracing::debug!(%peer, error = %e, "closing connection");
            return;
        }
    }
}

async fn serve(listener: TcpListener, node: Arc<Node>) {
    loop {
        match listener.accept().await {
            Ok((s, peer)) => {
                tokio::spawn(serve_conn(s, peer, node.clone()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_BACKOFF_MS)).await;
            }
        }
    }
}

/// Asks `addr` (any member) to admit this node, following leader hints, until it succeeds.
async fn join_cluster(node_id: u64, advertise: String, addr: String) {
    let mut target = addr.clone();
    loop {
        let req = Request::Client(ClientRequest::AddNode {
            node_id,
            addr: advertise.clone(),
            forwarded: false,
        });
        match network::call(&target, &req, Duration::from_millis(ADD_NODE_TIMEOUT_MS)).await {
            Ok(Response::Client(ClientResponse::NodeAdded)) => {
                tracing::info!(node_id, via = %target, "joined the cluster as voter");
                return;
            }
            Ok(Response::Client(ClientResponse::Error(WireError::NotController {
                leader_addr: Some(a),
                ..
            }))) => target = a,
            Ok(other) => {
                tracing::info!(node_id, via = %target, answer = ?other, "join not done yet");
                target = addr.clone();
            }
            Err(e) => {
                tracing::info!(node_id, via = %target, error = %e, "join attempt failed");
                target = addr.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(JOIN_RETRY_INTERVAL_MS)).await;
    }
}

struct Started {
    node: Arc<Node>,
    listener: Option<TcpListener>,
    listen_addr: Option<SocketAddr>,
    lock: std::fs::File,
}

async fn setup(config: &MetaConfig) -> Result<Started> {
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| MetaError::io(format!("create data dir {}", config.data_dir.display()), e))?;
    let lock_path = config.data_dir.join(DATA_DIR_LOCK_FILE);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| MetaError::io(format!("open {}", lock_path.display()), e))?;
    lock.try_lock().map_err(|e| MetaError::Config {
        context: format!(
            "data dir {} is in use by another process ({e})",
            config.data_dir.display()
        ),
    })?;
    let raft_dir = config.data_dir.join(RAFT_DIR);
    let (log, recovery) = LogStore::open(&raft_dir)?;
    if recovery.truncated_bytes > 0 {
        tracing::warn!(?recovery, "raft log recovered with a truncated tail");
    }
    let sm = StateMachineStore::open(&raft_dir)?;
    let pristine = log.is_pristine() && !sm.has_snapshot();

    let (listener, listen_addr) = match config.listen {
        Some(a) => {
            let l = TcpListener::bind(a)
                .await
                .map_err(|e| MetaError::io(format!("bind {a}"), e))?;
            let bound = l.local_addr().map_err(|e| MetaError::io("local_addr", e))?;
            (Some(l), Some(bound))
        }
        None => (None, None),
    };
    let advertise = config
        .advertise
        .clone()
        .or_else(|| listen_addr.map(|a| a.to_string()))
        .unwrap_or_default();

    let rc = openraft::Config {
        cluster_name: "ringlog-meta".into(),
        heartbeat_interval: config.heartbeat_interval_ms,
        election_timeout_min: config.election_timeout_min_ms,
        election_timeout_max: config.election_timeout_max_ms,
        install_snapshot_timeout: INSTALL_SNAPSHOT_TIMEOUT_MS,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_every_logs),
        max_in_snapshot_log_to_keep: config.logs_kept_after_snapshot,
        snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
        ..Default::default()
    }
    .validate()
    .map_err(|e| MetaError::Config {
        context: format!("raft config: {e}"),
    })?;
    let raft = Raft::new(
        config.node_id,
        Arc::new(rc),
        NetworkFactory {
            self_id: config.node_id,
        },
        log,
        sm.clone(),
    )
    .await
    .map_err(|e| MetaError::raft(format!("starting raft: {e}")))?;

    if pristine && config.join.is_none() {
        let members: BTreeMap<u64, BasicNode> = if config.peers.is_empty() {
            BTreeMap::from([(config.node_id, BasicNode::new(&advertise))])
        } else {
            config
                .peers
                .iter()
                .map(|(id, a)| (*id, BasicNode::new(a)))
                .collect()
        };
        // The lowest initial member bootstraps at once; the others only if nothing reached
        // them after a while (the lowest member never came up). Initialising on all of them at
        // once works too but costs a few rounds of competing elections.
        if members.keys().next() == Some(&config.node_id) {
            tracing::info!(?members, "initialising a new cluster");
            if let Err(e) = raft.initialize(members).await {
                tracing::info!(error = %e, "initialize refused");
            }
        } else {
            let r = raft.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(BOOTSTRAP_FALLBACK_MS)).await;
                if r.is_initialized().await.unwrap_or(true) {
                    return;
                }
                tracing::info!(?members, "lowest member absent, initialising the cluster");
                if let Err(e) = r.initialize(members).await {
                    tracing::info!(error = %e, "initialize refused");
                }
            });
        }
    }
    let (proposer, proposals) = flume::unbounded();
    tokio::spawn(propose_loop(raft.clone(), proposals));
    Ok(Started {
        node: Arc::new(Node {
            id: config.node_id,
            raft,
            sm,
            applied: config.applied.clone(),
            proposer,
        }),
        listener,
        listen_addr,
        lock,
    })
}

async fn run(
    config: MetaConfig,
    rx: flume::Receiver<Cmd>,
    ready: flume::Sender<Result<Option<SocketAddr>>>,
    leader: Arc<std::sync::atomic::AtomicU64>,
) -> Option<std::fs::File> {
    let started = match setup(&config).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "metastore start failed");
            let _ = ready.send(Err(e));
            return None;
        }
    };
    let node = started.node.clone();
    if let Some(l) = started.listener {
        tokio::spawn(serve(l, node.clone()));
    }
    if let Some(join) = config.join.clone() {
        if !node.status().voters.contains(&config.node_id) {
            let advertise = config
                .advertise
                .clone()
                .or_else(|| started.listen_addr.map(|a| a.to_string()))
                .unwrap_or_default();
            tokio::spawn(join_cluster(config.node_id, advertise, join));
        }
    }
    if config.broker_session_timeout_ms > 0 {
        tokio::spawn(fence_loop(
            node.clone(),
            Duration::from_millis(config.broker_session_timeout_ms),
        ));
    }
    let mut metrics = node.raft.metrics();
    tokio::spawn(async move {
        loop {
            let seen = metrics.borrow().current_leader.unwrap_or(NO_LEADER);
            leader.store(seen, std::sync::atomic::Ordering::Relaxed);
            if metrics.changed().await.is_err() {
                return;
            }
        }
    });
    tracing::info!(node_id = config.node_id, listen = ?started.listen_addr, "metastore running");
    let _ = ready.send(Ok(started.listen_addr));

    let mut shutdown_reply = None;
    while let Ok(cmd) = rx.recv_async().await {
        let node = node.clone();
        match cmd {
            Cmd::Shutdown(reply) => {
                shutdown_reply = Some(reply);
                break;
            }
            Cmd::Read(reply) => {
                let _ = reply.send(Ok(node.sm.read()));
            }
            Cmd::Subscribe(reply) => {
                let _ = reply.send(Ok(node.sm.subscribe()));
            }
            Cmd::Status(reply) => {
                let _ = reply.send(Ok(node.status()));
            }
            Cmd::Write(cmd, reply) => {
                // A raft log or hard-state write that fails for want of space stops openraft
                // for good; a write is refused before it reaches raft while the disk is nearly
                // full, and accepted again once space is freed.
                if let Err(e) = check_free_space(&config.data_dir) {
                    let _ = reply.send(Err(e));
                    continue;
                }
                tokio::spawn(async move {
                    let _ = reply.send(node.write(cmd, false).await);
                });
            }
            Cmd::LinearizableRead(reply) => {
                tokio::spawn(async move {
                    let _ = reply.send(node.linearizable_read(false).await);
                });
            }
            Cmd::ReadIndex(reply) => {
                tokio::spawn(async move {
                    let _ = reply.send(node.read_index(false).await);
                });
            }
            Cmd::AddNode {
                node_id,
                addr,
                reply,
            } => {
                tokio::spawn(async move {
                    let _ = reply.send(node.add_node(node_id, addr, false).await);
                });
            }
            Cmd::WaitNodesApplied {
                index,
                nodes,
                timeout_ms,
                reply,
            } => {
                tokio::spawn(async move {
                    let _ = reply.send(node.wait_nodes_applied(index, nodes, timeout_ms).await);
                });
            }
        }
    }
    tracing::info!(node_id = config.node_id, "metastore shutting down");
    if let Err(e) = node.raft.shutdown().await {
        tracing::warn!(error = %e, "raft shutdown");
    }
    if let Some(r) = shutdown_reply {
        let _ = r.send(Ok(()));
    }
    Some(started.lock)
}

/// While this node leads, fences the registered brokers that sent no heartbeat within
/// `session_timeout` (see `crate::liveness`). A node that just became the leader gives every
/// broker one session first: it may have been cut off from their heartbeats before.
async fn fence_loop(node: Arc<Node>, session_timeout: Duration) {
    let (_, state, changes) = node.sm.subscribe();
    let mut tracker = LivenessTracker::new(&state.brokers, std::time::Instant::now());
    drop(state);
    let tick = (session_timeout / FENCE_CHECKS_PER_SESSION).max(Duration::from_millis(10));
    let mut leading = false;
    // One timer for the whole loop: a sleep made anew on every turn would never fire while
    // changes arrive more often than `tick`.
    let mut checks = tokio::time::interval(tick);
    checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            c = changes.recv_async() => {
                let Ok(c) = c else { return };
                tracker.observe(&c.change, std::time::Instant::now());
            }
            _ = checks.tick() => {
                let now = std::time::Instant::now();
                let brokers = node.sm.brokers();
                let leader = node.raft.metrics().borrow().current_leader == Some(node.id);
                if leader && !leading {
                    tracker.reset(&brokers, now);
                }
                leading = leader;
                if !leader {
                    continue;
                }
                // The breaker refuses past this many fenced: no write that is bound to fail.
                let room = crate::state::max_fenced_brokers(brokers.len())
                    .saturating_sub(brokers.values().filter(|b| b.fenced).count());
                let due = tracker.due_fences(&brokers, now, session_timeout);
                for (node_id, incarnation) in due.into_iter().take(room) {
                    match node.write(Command::FenceBroker { node_id, incarnation }, false).await {
                        Ok(_) => tracing::warn!(node_id, timeout_ms = session_timeout.as_millis() as u64, "broker fenced: no heartbeat within its session"),
                        Err(e) => tracing::info!(node_id, error = %e, "broker not fenced"),
                    }
                }
            }
        }
    }
}

/// Free bytes the metastore's disk must keep for a write to be proposed: room for many raft
/// entries, a hard-state rewrite and a snapshot of a large state.
pub const META_MIN_FREE_BYTES: u64 = 16 << 20;

/// Refuses with `NoSpace` when the disk under `dir` has less than [`META_MIN_FREE_BYTES`] free.
fn check_free_space(dir: &std::path::Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: statvfs writes into the zeroed struct we own; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Ok(()); // cannot tell: let the write try
    }
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    if free < META_MIN_FREE_BYTES {
        return Err(MetaError::NoSpace {
            dir: dir.display().to_string(),
            free_bytes: free,
        });
    }
    Ok(())
}
