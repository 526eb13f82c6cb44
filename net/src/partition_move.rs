//! Partition moves: to another core of this node (`move_to_core`, `ringlog shard move`,
//! `POST /v1/shard-move`), and between nodes (issue #17): `POST /v1/partition-move` on any
//! node's admin listener, `ringlog partition move TOPIC/P --node N [--core C]`.
//!
//! The node that owns the partition runs the move; a node asked for another node's partition
//! forwards the request to the owner over node RPC (`NodeRequest::MovePartition`).
//! 1. **Catch-up**, while the partition keeps serving: every file of its directory is copied
//!    into a staging directory on the new node (`MoveBegin`, then `MoveChunk`s of at most
//!    [`MOVE_CHUNK_BYTES`]; a file's last chunk is fdatasync'd there).
//! 2. **Handoff**: the partition stops serving here (clients get NOT_LEADER_OR_FOLLOWER, a
//!    retriable error, and refresh metadata), its fan-out cursors stop, and it closes cleanly
//!    (everything fdatasync'd, the clean-shutdown marker written). What changed since the
//!    catch-up is copied again: the active segment, a segment compacted, added or deleted,
//!    cursor files, anything modified within [`RECOPY_WINDOW_MS`] of its catch-up copy. The
//!    new node installs the directory (`MoveCommit`: every file's length checked against
//!    the owner's listing, files it does not list removed, the staging directory renamed into
//!    place and the rename made durable).
//! 3. The new assignment is written to the metastore and applied by every node: the new owner
//!    opens the partition from the copied files (its producer state is rebuilt from the log,
//!    so an idempotent producer's retry of a batch stored before the move is recognised),
//!    its cursors resume from the copied cursor files, and this node deletes its copy.
//!
//! A failure before the metastore write resumes the partition here and drops the staging
//! (`MoveAbort`). The partition is never served by two nodes: the old owner stopped before
//! the copy that the new one opens, and the new one opens only what the metastore assigns it.
//! Every acknowledged record was fdatasync'd into the files the handoff copies.
//!
//! Staging directories live in `<data-dir>/moving/` and are removed when a node starts
//! (a move interrupted by a crash is simply not made). Peers are not authenticated until the
//! security issue (#19); file names from a peer are checked ([`valid_file_name`]) so that a
//! peer can write nowhere but into its staging directory.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use engine::partition_copy::{self, valid_file_name, Stamp};
use meta::{Assignment, Command};

use crate::core::{is_internal_topic, CoreState, PartitionKey};
use crate::node_rpc::{self, MoveFile, NodeRequest, NodeResponse};

/// The most bytes one `MoveChunk` carries.
pub const MOVE_CHUNK_BYTES: usize = 1 << 20;
/// Moves a node receives at once; a further `MoveBegin` is refused until one ends.
pub const MAX_INCOMING_MOVES: usize = 4;
/// The longest a whole move may take when another node runs it for us (the forwarded call).
pub const MOVE_TIMEOUT_MS: u64 = 30 * 60 * 1_000;
/// The largest file a move writes (a chunk past it is refused: a peer's offset is not a
/// licence to grow a sparse file without end).
pub const MAX_MOVE_FILE_BYTES: u64 = 1 << 40;
/// Files one partition directory may list in a `MoveCommit`.
pub const MAX_MOVE_FILES: usize = 100_000;
/// A file modified this close to (or after) its catch-up copy is copied again at the
/// handoff whatever its length and time say (file times are coarse).
pub const RECOPY_WINDOW_MS: u64 = 2_000;

/// What a finished move reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub from_node: u64,
    pub from_core: u32,
    pub to_node: u64,
    pub to_core: u32,
    /// Bytes copied, catch-up and handoff together.
    pub copied_bytes: u64,
    /// How long the partition served nowhere (stop to the metastore write applied here).
    pub handoff_ms: u64,
}

/// An HTTP status and a message naming the problem.
pub type MoveRefusal = (u16, String);

/// Partitions whose move this node runs now (the admin path only: never touched by produce
/// or fetch).
static MOVES_RUNNING: Mutex<Option<HashSet<PartitionKey>>> = Mutex::new(None);

struct RunningGuard(PartitionKey);

impl RunningGuard {
    fn claim(key: PartitionKey) -> Option<Self> {
        let mut set = MOVES_RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        set.get_or_insert_with(HashSet::new)
            .insert(key.clone())
            .then_some(RunningGuard(key))
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut set = MOVES_RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = set.as_mut() {
            s.remove(&self.0);
        }
    }
}

/// Why an internal topic's partition is not moved (checked first: it may be replicated too).
fn internal_refusal(topic: &str) -> Result<(), MoveRefusal> {
    if is_internal_topic(topic) {
        return Err((
            400,
            format!("{topic} is internal: its groups and transactions live on the node that owns each partition, so its partitions do not move"),
        ));
    }
    Ok(())
}

/// Why a replicated partition is not moved (before anything is released).
fn replicated_refusal(topic: &str, partition: u32) -> String {
    format!(
        "{topic}/{partition} is replicated: move its replicas with `ringlog partition reassign {topic}/{partition} --replicas ID,...` (AlterPartitionReassignments), and its leadership with `ringlog partition elect`"
    )
}

/// Moves `topic`/`partition` to node `to_node` (core `to_core`, or its least loaded core).
/// Runs here when this node owns the partition, and is forwarded to the owner otherwise.
pub async fn move_partition(
    state: &Rc<CoreState>,
    topic: &str,
    partition: u32,
    to_node: u64,
    to_core: Option<u32>,
) -> Result<Moved, MoveRefusal> {
    let owner = {
        let m = state.meta.borrow();
        if m.topic(topic).is_none() {
            return Err((404, format!("unknown topic {topic:?}")));
        }
        internal_refusal(topic)?;
        if m.replica_set(topic, partition).is_some() {
            return Err((409, replicated_refusal(topic, partition)));
        }
        m.assignments
            .get(topic)
            .and_then(|a| a.get(partition as usize))
            .copied()
            .ok_or_else(|| (404, format!("topic {topic:?} has no partition {partition}")))?
    };
    if owner.node_id == state.node_id() {
        return run_move(state, topic, partition, owner, to_node, to_core).await;
    }
    let req = NodeRequest::MovePartition {
        topic: topic.to_string(),
        partition,
        node: to_node,
        core: to_core,
    };
    match node_rpc::call_within(
        state,
        owner.node_id,
        owner.core_index,
        &req,
        MOVE_TIMEOUT_MS,
    )
    .await
    {
        Ok(NodeResponse::Moved {
            from_core,
            to_core,
            copied_bytes,
            handoff_ms,
        }) => Ok(Moved {
            from_node: owner.node_id,
            from_core,
            to_node,
            to_core,
            copied_bytes,
            handoff_ms,
        }),
        Ok(NodeResponse::Failed { reason }) => Err((409, reason)),
        Ok(other) => Err((502, format!("node {} answered {other:?}", owner.node_id))),
        Err(e) => Err((
            503,
            format!("the owner of {topic}/{partition} could not be asked to move it: {e}"),
        )),
    }
}

/// The move of a partition this node owns (see the module comment).
async fn run_move(
    state: &Rc<CoreState>,
    topic: &str,
    partition: u32,
    owner: Assignment,
    to_node: u64,
    to_core: Option<u32>,
) -> Result<Moved, MoveRefusal> {
    internal_refusal(topic)?;
    let (incarnation, to_core) = {
        let m = state.meta.borrow();
        let incarnation = m
            .topic(topic)
            .map(|t| t.incarnation_id.clone())
            .ok_or_else(|| (404, format!("unknown topic {topic:?}")))?;
        let Some(dest) = m.brokers.get(&to_node).filter(|b| !b.fenced) else {
            let live: Vec<u64> = m.live_brokers().map(|b| b.node_id).collect();
            return Err((
                400,
                format!("node {to_node} is not a live broker of this cluster (live: {live:?})"),
            ));
        };
        let core = match to_core {
            Some(c) if c >= dest.cores => {
                return Err((
                    400,
                    format!(
                        "core {c} does not exist: node {to_node} runs {} cores",
                        dest.cores
                    ),
                ))
            }
            Some(c) => c,
            None => crate::cluster::least_loaded_core(&m, to_node, dest.cores, &[]),
        };
        (incarnation, core)
    };
    if to_node == state.node_id() {
        let from = move_to_core(state, topic, partition, to_core as usize).await?;
        return Ok(Moved {
            from_node: to_node,
            from_core: from as u32,
            to_node,
            to_core,
            copied_bytes: 0,
            handoff_ms: 0,
        });
    }
    let key: PartitionKey = (topic.to_string(), partition);
    let _running = RunningGuard::claim(key.clone()).ok_or_else(|| {
        (
            409,
            format!("a move of {topic}/{partition} is already running"),
        )
    })?;
    let to = Peer {
        node: to_node,
        core: to_core,
        move_id: meta::state::random_u64(),
    };
    let dir = state.ctx.data_dir.partition_dir(topic, partition);
    let from_core = owner.core_index as usize;
    tracing::info!(%topic, partition, to_node, to_core, move_id = to.move_id, "partition move: catch-up");
    to.ask(
        state,
        NodeRequest::MoveBegin {
            move_id: to.move_id,
            topic: topic.to_string(),
            partition,
            incarnation: incarnation.clone(),
        },
    )
    .await
    .map_err(|e| (409, format!("node {to_node} refused the move: {e}")))?;
    let mut copy = Copy {
        dir: dir.clone(),
        sent: HashMap::new(),
        copied_bytes: 0,
    };
    if let Err(e) = copy.pass(state, &to, false).await {
        to.abort(state, topic, partition).await;
        return Err((
            409,
            format!("copying {topic}/{partition} to node {to_node}: {e}"),
        ));
    }
    let caught_up = copy.copied_bytes;
    // Handoff: stop serving, then copy what changed and install it there.
    let stopped = Instant::now();
    let (t, p) = (topic.to_string(), partition);
    let release =
        move |s: Rc<CoreState>| async move { crate::opening::release_partition(&s, &t, p).await };
    let released = match crate::route::on_core(state, from_core, release).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(gone) => Err(gone.to_string()),
    };
    let handoff = match released {
        Ok(()) => copy.handoff(state, &to, topic, partition).await,
        Err(e) => Err(format!(
            "closing {topic}/{partition} on core {from_core}: {e}"
        )),
    };
    let resume = |state: &Rc<CoreState>| {
        let (t, p) = (topic.to_string(), partition);
        let state = state.clone();
        async move {
            let resume = move |s: Rc<CoreState>| async move {
                crate::reconcile::resume_partition(&s, &t, p).await
            };
            let _ = crate::route::on_core(&state, from_core, resume).await;
        }
    };
    if let Err(e) = handoff {
        to.abort(state, topic, partition).await;
        resume(state).await;
        return Err((
            409,
            format!("handing {topic}/{partition} to node {to_node}: {e}"),
        ));
    }
    let cmd = Command::SetAssignment {
        name: topic.to_string(),
        partition,
        assignment: Assignment {
            node_id: to_node,
            core_index: to_core,
        },
    };
    let applied = match state.ctx.meta.write(cmd).await {
        Ok(a) => a,
        Err(e) => {
            to.abort(state, topic, partition).await;
            resume(state).await;
            return Err((
                409,
                format!("recording the move of {topic}/{partition}: {e}"),
            ));
        }
    };
    crate::api::admin::wait_all_cores(state, applied.log_index).await;
    let handoff_ms = stopped.elapsed().as_millis() as u64;
    // The metastore names the new owner: this copy is never served again.
    if let Err(e) = engine::io::remove_dir_tree(&dir).await {
        tracing::warn!(dir = %dir.display(), error = %e, "removing the moved partition's old copy");
    }
    if let Err((_, e)) = crate::api::admin::wait_other_nodes(state, applied.log_index).await {
        tracing::warn!(%topic, partition, error = %e, "partition moved; not every node has applied it yet");
    }
    tracing::info!(%topic, partition, to_node, to_core, copied_bytes = copy.copied_bytes, caught_up_bytes = caught_up, handoff_ms, "partition moved to another node");
    Ok(Moved {
        from_node: owner.node_id,
        from_core: owner.core_index,
        to_node,
        to_core,
        copied_bytes: copy.copied_bytes,
        handoff_ms,
    })
}

/// Moves `topic`/`partition` to `to` core of this node: the old owner stops serving and closes
/// it cleanly (producers get NOT_LEADER_OR_FOLLOWER, a retriable error, meanwhile), the new
/// assignment is written to the metastore, and every core applies it (the new owner opens the
/// partition). Acknowledged records were fdatasync'd before the close, and nothing is appended
/// twice: no append is in two logs. Returns the old core.
pub async fn move_to_core(
    state: &Rc<CoreState>,
    topic: &str,
    partition: u32,
    to: usize,
) -> Result<usize, (u16, String)> {
    if to >= state.shards.cores() {
        return Err((
            400,
            format!(
                "core {to} does not exist: this broker runs {} cores",
                state.shards.cores()
            ),
        ));
    }
    let replicated = state.meta.borrow().replica_set(topic, partition).cloned();
    if let Some(r) = replicated {
        return move_replica_to_core(state, topic, partition, &r, to).await;
    }
    let from = state.owner_core(topic, partition).ok_or((
        400,
        format!("unknown partition {topic}/{partition} on this node"),
    ))?;
    if from == to {
        return Ok(from);
    }
    let cmd = Command::SetAssignment {
        name: topic.to_string(),
        partition,
        assignment: Assignment {
            node_id: state.node_id(),
            core_index: to as u32,
        },
    };
    release_and_record(state, topic, partition, from, to, cmd).await
}

/// The end of a move between the cores of this node: `topic`/`partition` is released on core
/// `from` (under its replica's role lock: no copy or epoch start in flight), `cmd` is
/// written to the metastore and applied on every core (core `to` opens it), or, when the
/// write fails, it is served on `from` again.
async fn release_and_record(
    state: &Rc<CoreState>,
    topic: &str,
    partition: u32,
    from: usize,
    to: usize,
    cmd: Command,
) -> Result<usize, (u16, String)> {
    let (t, p) = (topic.to_string(), partition);
    let release =
        move |s: Rc<CoreState>| async move { crate::replica::release_for_move(&s, &t, p).await };
    let released = match crate::route::on_core(state, from, release).await {
        Ok(r) => r,
        Err(gone) => Err(gone.to_string()),
    };
    released.map_err(|e| {
        (
            409,
            format!("closing {topic}/{partition} on core {from}: {e}"),
        )
    })?;
    match state.ctx.meta.write(cmd).await {
        Ok(applied) => {
            crate::api::admin::wait_all_cores(state, applied.log_index).await;
            tracing::info!(%topic, partition, from, to, "partition moved to another core");
            Ok(from)
        }
        Err(e) => {
            let (t, p) = (topic.to_string(), partition);
            let resume = move |s: Rc<CoreState>| async move {
                crate::reconcile::resume_partition(&s, &t, p).await
            };
            let _ = crate::route::on_core(state, from, resume).await;
            Err((409, format!("recording the move: {e}")))
        }
    }
}

/// `move_to_core` of this node's replica of a replicated partition: released on its core,
/// then `Command::MoveReplicaCore` (`release_and_record`); the new core opens it and takes its role (a leader at a new
/// epoch, a follower truncating against its leader as after any leader change). Internal
/// topics' replicas stay where their coordinator state is.
async fn move_replica_to_core(
    state: &Rc<CoreState>,
    topic: &str,
    partition: u32,
    r: &meta::PartitionReplicas,
    to: usize,
) -> Result<usize, (u16, String)> {
    internal_refusal(topic)?;
    let node = state.node_id();
    let here = r.replica_on(node).ok_or((
        400,
        format!("this node (node {node}) holds no replica of {topic}/{partition}"),
    ))?;
    if r.reassigning() {
        return Err((
            409,
            format!("{topic}/{partition}: a reassignment is under way; move the replica once it completes"),
        ));
    }
    let from = here.core_index as usize;
    if from == to {
        return Ok(from);
    }
    let cmd = Command::MoveReplicaCore {
        name: topic.to_string(),
        partition,
        node_id: node,
        core_index: to as u32,
    };
    release_and_record(state, topic, partition, from, to, cmd).await
}

/// The receiving end of one move.
struct Peer {
    node: u64,
    core: u32,
    move_id: u64,
}

impl Peer {
    async fn ask(&self, state: &CoreState, req: NodeRequest) -> Result<(), String> {
        match node_rpc::call(state, self.node, self.core, &req).await {
            Ok(NodeResponse::Done) => Ok(()),
            Ok(NodeResponse::Failed { reason }) => Err(reason),
            Ok(other) => Err(format!("unexpected answer {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn abort(&self, state: &CoreState, topic: &str, partition: u32) {
        let req = NodeRequest::MoveAbort {
            move_id: self.move_id,
            topic: topic.to_string(),
            partition,
        };
        if let Err(e) = self.ask(state, req).await {
            // Its staging goes when it restarts; an installed copy it does not serve is
            // replaced by the next move there.
            tracing::warn!(node = self.node, move_id = self.move_id, error = %e, "aborting a partition move");
        }
    }
}

/// The owner's side of the copy: what was sent, and when it was listed.
struct Copy {
    dir: PathBuf,
    sent: HashMap<String, (Stamp, u128)>,
    copied_bytes: u64,
}

impl Copy {
    /// Sends every file of the directory that `sent` does not hold as it is now (all of them
    /// the first time); `handoff` also re-sends files modified near their last copy.
    /// Returns the directory's listing.
    async fn pass(
        &mut self,
        state: &CoreState,
        to: &Peer,
        handoff: bool,
    ) -> Result<Vec<MoveFile>, String> {
        let listing = list_files(&self.dir).await?;
        for (name, stamp) in &listing {
            let fresh = match self.sent.get(name) {
                Some((s, listed_at_ns)) => {
                    s != stamp
                        || (handoff
                            && s.mtime_ns + u128::from(RECOPY_WINDOW_MS) * 1_000_000
                                >= *listed_at_ns)
                }
                None => true,
            };
            if !fresh {
                continue;
            }
            let listed_at_ns = now_ns();
            match self.send_file(state, to, name, stamp.len).await {
                Ok(bytes) => {
                    self.copied_bytes += bytes;
                    self.sent.insert(name.clone(), (*stamp, listed_at_ns));
                }
                // A temporary file renamed away during the catch-up; the handoff lists again.
                Err(SendError::Gone(_)) if !handoff => {}
                Err(SendError::Gone(e)) => {
                    return Err(format!(
                        "reading {} of the closed partition: {e}",
                        self.dir.join(name).display()
                    ))
                }
                Err(SendError::Peer(e)) => {
                    return Err(format!("sending {name} to node {}: {e}", to.node))
                }
            }
        }
        Ok(listing
            .into_iter()
            .map(|(name, s)| MoveFile { name, len: s.len })
            .collect())
    }

    /// Copies what changed since the catch-up from the closed partition and has the new
    /// node install the directory.
    async fn handoff(
        &mut self,
        state: &CoreState,
        to: &Peer,
        topic: &str,
        partition: u32,
    ) -> Result<(), String> {
        let files = self.pass(state, to, true).await?;
        if files.len() > MAX_MOVE_FILES {
            return Err(format!(
                "the partition directory holds {} files, more than a move carries ({MAX_MOVE_FILES})",
                files.len()
            ));
        }
        to.ask(
            state,
            NodeRequest::MoveCommit {
                move_id: to.move_id,
                topic: topic.to_string(),
                partition,
                files,
            },
        )
        .await
    }

    /// Sends `name`'s first `len` bytes in chunks. Returns the bytes sent.
    async fn send_file(
        &self,
        state: &CoreState,
        to: &Peer,
        name: &str,
        len: u64,
    ) -> Result<u64, SendError> {
        let path = self.dir.join(name);
        // A chunk's frame stays well inside the receiver's `max-request-bytes` (assumed the
        // same as ours) with its framing.
        let chunk_bytes = MOVE_CHUNK_BYTES
            .min(state.ctx.config.max_request_bytes / 2)
            .max(1);
        let mut offset = 0u64;
        loop {
            let want = (len - offset).min(chunk_bytes as u64) as usize;
            let p = path.clone();
            let bytes = glommio::executor()
                .spawn_blocking(move || partition_copy::read_chunk(&p, offset, want))
                .await
                .map_err(SendError::Gone)?;
            let last = offset + bytes.len() as u64 >= len || bytes.len() < want;
            let n = bytes.len() as u64;
            let req = NodeRequest::MoveChunk {
                move_id: to.move_id,
                file: name.to_string(),
                offset,
                bytes,
                last,
            };
            to.ask(state, req).await.map_err(SendError::Peer)?;
            offset += n;
            if last {
                return Ok(offset);
            }
        }
    }
}

/// Why a file was not sent whole.
enum SendError {
    /// It could not be read here (during the catch-up: renamed away, deleted).
    Gone(std::io::Error),
    /// The receiving node refused a chunk or could not be reached.
    Peer(String),
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// The regular files of `dir` with their stamps, sorted by name.
async fn list_files(dir: &Path) -> Result<Vec<(String, Stamp)>, String> {
    let d = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || partition_copy::list_files(&d))
        .await
        .map_err(|e| format!("listing {}: {e}", dir.display()))
}

// ---- The receiving node ----

/// Answers the move calls of another node (`MoveBegin`, `MoveChunk`, `MoveCommit`,
/// `MoveAbort`) and a forwarded `MovePartition`.
pub async fn serve(state: &Rc<CoreState>, req: NodeRequest) -> NodeResponse {
    let done = |r: Result<(), String>| match r {
        Ok(()) => NodeResponse::Done,
        Err(reason) => NodeResponse::Failed { reason },
    };
    match req {
        NodeRequest::MoveBegin {
            move_id,
            topic,
            partition,
            incarnation,
        } => done(begin(state, move_id, &topic, partition, &incarnation).await),
        NodeRequest::MoveChunk {
            move_id,
            file,
            offset,
            bytes,
            last,
        } => done(chunk(state, move_id, file, offset, bytes, last).await),
        NodeRequest::MoveCommit {
            move_id,
            topic,
            partition,
            files,
        } => done(commit(state, move_id, &topic, partition, files).await),
        NodeRequest::MoveAbort {
            move_id,
            topic,
            partition,
        } => done(abort(state, move_id, &topic, partition).await),
        NodeRequest::MovePartition {
            topic,
            partition,
            node,
            core,
        } => match move_partition(state, &topic, partition, node, core).await {
            // Run by the owner only: a forwarded call never forwards again.
            Ok(m) => NodeResponse::Moved {
                from_core: m.from_core,
                to_core: m.to_core,
                copied_bytes: m.copied_bytes,
                handoff_ms: m.handoff_ms,
            },
            Err((_, reason)) => NodeResponse::Failed { reason },
        },
        other => NodeResponse::Failed {
            reason: format!("not a move call: {other:?}"),
        },
    }
}

/// Checks that `topic`/`partition` of incarnation `incarnation` exists and that this node
/// does not serve it.
fn check_incoming(
    state: &CoreState,
    topic: &str,
    partition: u32,
    incarnation: Option<&str>,
) -> Result<(), String> {
    let m = state.meta.borrow();
    let t = m
        .topic(topic)
        .ok_or_else(|| format!("unknown topic {topic:?} here"))?;
    if incarnation.is_some_and(|i| i != t.incarnation_id) {
        return Err(format!("{topic} was deleted and created again meanwhile"));
    }
    let a = m
        .assignments
        .get(topic)
        .and_then(|a| a.get(partition as usize))
        .ok_or_else(|| format!("topic {topic:?} has no partition {partition}"))?;
    if a.node_id == state.node_id() {
        return Err(format!(
            "{topic}/{partition} is already served by this node"
        ));
    }
    Ok(())
}

async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<R> + Send + 'static,
) -> Result<R, String> {
    glommio::executor()
        .spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())
}

async fn begin(
    state: &CoreState,
    move_id: u64,
    topic: &str,
    partition: u32,
    incarnation: &str,
) -> Result<(), String> {
    check_incoming(state, topic, partition, Some(incarnation))?;
    let root = state.ctx.data_dir.root().to_path_buf();
    blocking(move || partition_copy::begin(&root, move_id, MAX_INCOMING_MOVES)).await?;
    tracing::info!(%topic, partition, move_id, "receiving a partition move");
    Ok(())
}

async fn chunk(
    state: &CoreState,
    move_id: u64,
    file: String,
    offset: u64,
    bytes: Vec<u8>,
    last: bool,
) -> Result<(), String> {
    if !valid_file_name(&file) {
        return Err(format!("{file:?} is not a partition file name"));
    }
    if offset.saturating_add(bytes.len() as u64) > MAX_MOVE_FILE_BYTES {
        return Err(format!(
            "a chunk ending past {MAX_MOVE_FILE_BYTES} bytes of {file}"
        ));
    }
    if bytes.len() > MOVE_CHUNK_BYTES {
        return Err(format!(
            "a chunk of {} bytes, more than {MOVE_CHUNK_BYTES}",
            bytes.len()
        ));
    }
    let root = state.ctx.data_dir.root().to_path_buf();
    blocking(move || partition_copy::write_chunk(&root, move_id, &file, offset, &bytes, last)).await
}

async fn commit(
    state: &CoreState,
    move_id: u64,
    topic: &str,
    partition: u32,
    files: Vec<MoveFile>,
) -> Result<(), String> {
    if files.len() > MAX_MOVE_FILES {
        return Err(format!("{} files, more than {MAX_MOVE_FILES}", files.len()));
    }
    if let Some(bad) = files.iter().find(|f| !valid_file_name(&f.name)) {
        return Err(format!("{:?} is not a partition file name", bad.name));
    }
    let incarnation = {
        let m = state.meta.borrow();
        m.topic(topic).map(|t| t.incarnation_id.clone())
    };
    check_incoming(state, topic, partition, incarnation.as_deref())?;
    let incarnation = incarnation.unwrap_or_default();
    let root = state.ctx.data_dir.root().to_path_buf();
    let target = state.ctx.data_dir.partition_dir(topic, partition);
    blocking(move || {
        let listed: HashMap<&str, u64> = files.iter().map(|f| (f.name.as_str(), f.len)).collect();
        partition_copy::install(&root, move_id, &listed, &incarnation, &target)
    })
    .await?;
    tracing::info!(%topic, partition, move_id, "partition move installed; served here once the metastore says so");
    Ok(())
}

async fn abort(state: &CoreState, move_id: u64, topic: &str, partition: u32) -> Result<(), String> {
    let root = state.ctx.data_dir.root().to_path_buf();
    // An installed copy goes too, unless this node serves the partition after all.
    let installed = check_incoming(state, topic, partition, None)
        .is_ok()
        .then(|| state.ctx.data_dir.partition_dir(topic, partition));
    blocking(move || partition_copy::abort(&root, move_id, installed.as_deref())).await?;
    tracing::info!(%topic, partition, move_id, "partition move aborted");
    Ok(())
}
