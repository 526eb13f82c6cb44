//! A follower core's replica fetchers (issue #18; Kafka's replica fetcher threads): one task
//! per leader (node, core) this core follows partitions of, fetching all of them with one
//! `NodeRequest::ReplicaFetchMany` at a time and applying the answers before the next. So a
//! core has at most one fetch in flight per leader core, each answer holds at most
//! `REPLICA_FETCH_RESPONSE_MAX_BYTES` (one larger batch still comes whole, and the read
//! stops at `MAX_REPLICA_FETCH_RESPONSE_BYTES`), and a quiet partition costs no call of its
//! own: the leader holds the fetch until any of its partitions has records.
//!
//! A partition joins its fetcher once its follower task (`replica::follow`) has cut its log
//! to the leader's, and is handed back when the log must be cut again (`HandBack`): the
//! fetch offset passed the leader's end, an append failed, or the leader's log starts past
//! this replica's end. A member whose role ended (its generation is gone) is dropped, which
//! ends its follower task's wait; a fetcher with no member left ends.
//!
//! Each answer is applied as a lone fetch was: the records appended through the durable
//! path under the partition's role lock (never into a log released meanwhile), the leader's
//! high watermark taken (bounded by this replica's durable end), its log start followed, and
//! every `CURSOR_COPY_INTERVAL_MS` its fan-out cursor files copied.

use std::rc::Rc;
use std::time::{Duration, Instant};

use meta::Assignment;

use crate::core::{CoreState, OwnedPartition, PartitionKey};
use crate::node_rpc::{NodeRequest, NodeResponse, ReplicaFetchAnswer, ReplicaFetchPartition};
use crate::replica_state::{FetchMember, HandBack};
use crate::replica_state::{
    CURSOR_COPY_INTERVAL_MS, MAX_COPIED_CURSOR_FILES, MAX_PARTITIONS_PER_REPLICA_FETCH,
    MAX_REPLICA_FETCH_RESPONSE_BYTES, REPLICA_FETCH_MAX_BYTES, REPLICA_FETCH_MAX_WAIT_MS,
    REPLICA_FETCH_RESPONSE_MAX_BYTES, REPLICA_RETRY_BACKOFF_MS,
};

/// One partition of a fetch under way.
struct InFlight {
    key: PartitionKey,
    generation: u64,
    part: Rc<OwnedPartition>,
}

/// Adds `key` (its follower task at `generation`, truncated) to this core's fetcher for
/// `leader`, starting the fetcher if there is none; the receiver gets the partition back
/// when its log must be cut again, and is closed when its role ends.
pub(crate) fn join_fetcher(
    state: &Rc<CoreState>,
    leader: Assignment,
    key: PartitionKey,
    epoch: i32,
    generation: u64,
) -> flume::Receiver<HandBack> {
    let (back, handed_back) = flume::bounded(1);
    let start = {
        let mut reps = state.data.replicas.borrow_mut();
        let start = !reps.fetchers.contains_key(&leader);
        let member = FetchMember {
            generation,
            epoch,
            back,
            last_cursor_copy: None,
        };
        reps.fetchers
            .entry(leader)
            .or_default()
            .members
            .insert(key, member);
        start
    };
    if start {
        let me = state.clone();
        glommio::spawn_local(async move { run_fetcher(me, leader).await }).detach();
    }
    handed_back
}

/// Hands `key` (its member of `generation`) back to its follower task, and out of
/// `leader`'s fetcher; a member of a newer role stays.
fn hand_back(
    state: &CoreState,
    leader: Assignment,
    key: &PartitionKey,
    generation: u64,
    why: HandBack,
) {
    let member = {
        let mut reps = state.data.replicas.borrow_mut();
        let Some(f) = reps.fetchers.get_mut(&leader) else {
            return;
        };
        if f.members
            .get(key)
            .is_none_or(|m| m.generation != generation)
        {
            return;
        }
        f.members.remove(key)
    };
    if let Some(m) = member {
        let _ = m.back.try_send(why);
    }
}

/// The next fetch of `leader`'s fetcher: its current members (those whose role ended
/// are dropped; one whose log is not open goes back to its task), at most
/// `MAX_PARTITIONS_PER_REPLICA_FETCH` from where the last one left off. `None`: no
/// member is left, and the fetcher is gone.
fn next_fetch(
    state: &CoreState,
    leader: Assignment,
) -> Option<(Vec<InFlight>, Vec<ReplicaFetchPartition>, usize)> {
    let mut closed = Vec::new();
    let picked = {
        let mut reps = state.data.replicas.borrow_mut();
        let reps = &mut *reps;
        let f = reps.fetchers.get_mut(&leader)?;
        let roles = &reps.map;
        f.members
            .retain(|k, m| roles.get(k).is_some_and(|r| r.generation == m.generation));
        if f.members.is_empty() {
            reps.fetchers.remove(&leader);
            return None;
        }
        let n = f.members.len();
        let start = f.next_start % n;
        let mut picked = Vec::with_capacity(n.min(MAX_PARTITIONS_PER_REPLICA_FETCH));
        for (key, m) in f
            .members
            .iter()
            .skip(start)
            .chain(f.members.iter().take(start))
            .take(MAX_PARTITIONS_PER_REPLICA_FETCH)
        {
            match state.partition_if_open(&key.0, key.1) {
                Some(part) => picked.push((key.clone(), m.generation, m.epoch, part)),
                None => closed.push((key.clone(), m.generation)),
            }
        }
        (picked, start)
    };
    let (picked, start) = picked;
    for (key, generation) in closed {
        hand_back(state, leader, &key, generation, HandBack::Truncate);
    }
    let (inflight, parts): (Vec<InFlight>, Vec<ReplicaFetchPartition>) = picked
        .into_iter()
        .map(|(key, generation, epoch, part)| {
            let req = ReplicaFetchPartition {
                topic: key.0.clone(),
                partition: key.1,
                incarnation: part.incarnation().to_string(),
                leader_epoch: epoch,
                fetch_offset: part.log().durable_end(),
                max_bytes: REPLICA_FETCH_MAX_BYTES,
            };
            (
                InFlight {
                    key,
                    generation,
                    part,
                },
                req,
            )
        })
        .unzip();
    Some((inflight, parts, start))
}

/// `leader`'s fetcher (see the module comment). Runs while it has members.
async fn run_fetcher(state: Rc<CoreState>, leader: Assignment) {
    let backoff = || glommio::timer::sleep(Duration::from_millis(REPLICA_RETRY_BACKOFF_MS));
    tracing::debug!(
        leader_node = leader.node_id,
        leader_core = leader.core_index,
        core = state.core,
        "replica fetcher started"
    );
    while let Some((inflight, parts, start)) = next_fetch(&state, leader) {
        if parts.is_empty() {
            backoff().await;
            continue;
        }
        let req = NodeRequest::ReplicaFetchMany {
            replica_node: state.node_id(),
            leader_core: leader.core_index,
            max_bytes: REPLICA_FETCH_RESPONSE_MAX_BYTES as u32,
            max_wait_ms: REPLICA_FETCH_MAX_WAIT_MS,
            partitions: parts,
        };
        let resp = crate::node_rpc::call_bounded(
            &state,
            leader.node_id,
            leader.core_index,
            &req,
            crate::node_rpc::NODE_RPC_TIMEOUT_MS,
            MAX_REPLICA_FETCH_RESPONSE_BYTES,
        )
        .await;
        let answers = match resp {
            Ok(NodeResponse::ReplicaBatch { answers }) if answers.len() == inflight.len() => {
                answers
            }
            Ok(other) => {
                tracing::debug!(leader_node = leader.node_id, answer = ?other, "replica fetch refused");
                backoff().await;
                continue;
            }
            Err(e) => {
                tracing::debug!(leader_node = leader.node_id, error = %e, "replica fetch failed");
                backoff().await;
                continue;
            }
        };
        // The next fetch starts after the last partition answered: those the byte budget
        // skipped, or past `MAX_PARTITIONS_PER_REPLICA_FETCH`, go first.
        let answered = answers
            .iter()
            .position(|a| *a == ReplicaFetchAnswer::Skipped)
            .unwrap_or(answers.len());
        if let Some(f) = state.data.replicas.borrow_mut().fetchers.get_mut(&leader) {
            f.next_start = start + answered;
        }
        let moved = answers.iter().any(|a| {
            matches!(
                a,
                ReplicaFetchAnswer::Records { .. } | ReplicaFetchAnswer::Skipped
            )
        });
        let applies = inflight
            .into_iter()
            .zip(answers)
            .map(|(f, a)| apply_fetched(&state, leader, f, a));
        engine::join::join_all(applies).await;
        if !moved {
            // Every partition refused (no leader yet, a transport error): wait a little.
            backoff().await;
        }
    }
    tracing::debug!(
        leader_node = leader.node_id,
        leader_core = leader.core_index,
        core = state.core,
        "replica fetcher ended"
    );
}

/// One partition's answer, applied as a lone fetch's was (see the module comment).
async fn apply_fetched(
    state: &CoreState,
    leader: Assignment,
    f: InFlight,
    answer: ReplicaFetchAnswer,
) {
    let InFlight {
        key,
        generation,
        part: p,
    } = f;
    let (bytes, high_watermark, log_start, cursor_files) = match answer {
        ReplicaFetchAnswer::Records {
            bytes,
            high_watermark,
            log_start,
            cursor_files,
        } => (bytes, high_watermark, log_start, cursor_files),
        ReplicaFetchAnswer::Skipped => return,
        ReplicaFetchAnswer::Diverging { leader_end } => {
            tracing::info!(topic = %key.0, partition = key.1, leader_end, "follower past the leader's end; truncating again");
            return hand_back(state, leader, &key, generation, HandBack::Truncate);
        }
        ReplicaFetchAnswer::BelowLogStart { log_start } => {
            tracing::warn!(topic = %key.0, partition = key.1, log_start, follower_end = p.log().durable_end(), "the leader's log starts past this follower's end: starting the replica over there");
            return hand_back(
                state,
                leader,
                &key,
                generation,
                HandBack::RestartAt(log_start),
            );
        }
        refused => {
            tracing::debug!(topic = %key.0, partition = key.1, answer = ?refused, "follower fetch refused");
            return;
        }
    };
    // An answer for a role that ended is dropped before the lock: a newer role's task may
    // hold it for long (its truncation asks the new leader), and the whole fetcher would
    // wait on it.
    if !state.current(&key, generation) {
        return;
    }
    let lock = state.role_lock(&key);
    let Ok(_held) = lock.acquire_permit(1).await else {
        return;
    };
    if !state.current(&key, generation) {
        return;
    }
    // Released meanwhile (a move to another core): nothing goes into the closed log.
    if !state
        .partition_if_open(&key.0, key.1)
        .is_some_and(|q| Rc::ptr_eq(&q, &p))
    {
        return hand_back(state, leader, &key, generation, HandBack::Truncate);
    }
    if !bytes.is_empty() {
        if let Err(e) = p.append_replica(&bytes).await {
            tracing::warn!(topic = %key.0, partition = key.1, error = %e, "follower append failed; truncating again");
            return hand_back(state, leader, &key, generation, HandBack::Truncate);
        }
    }
    p.log()
        .set_replicated_limit(high_watermark.min(p.log().durable_end()));
    // The leader's DeleteRecords reach the follower (a failover must not bring deleted
    // records back).
    let to = log_start.min(p.log().high_watermark());
    if to > p.log().log_start_offset() {
        if let Err(e) = p.delete_records(engine::DeleteBefore::Offset(to)).await {
            tracing::debug!(topic = %key.0, partition = key.1, error = %e, "following the leader's log start");
        }
    }
    let copy_due = {
        let mut reps = state.data.replicas.borrow_mut();
        reps.fetchers
            .get_mut(&leader)
            .and_then(|f| f.members.get_mut(&key))
            .filter(|m| m.generation == generation)
            .is_some_and(|m| {
                let due = m
                    .last_cursor_copy
                    .is_none_or(|t| t.elapsed() >= Duration::from_millis(CURSOR_COPY_INTERVAL_MS));
                if due {
                    m.last_cursor_copy = Some(Instant::now());
                }
                due
            })
    };
    if copy_due {
        copy_cursor_files(state, &key, &p, cursor_files).await;
    }
}

/// Keeps this follower's copies of its leader's fan-out cursor files: each one for a
/// current link of this parent, of that link's epoch and at or below this replica's
/// durable end (a new leader never resumes a cursor past what it holds), that differs
/// from the copy already stored. Called with the role lock held: a cursor of this
/// replica's own never runs meanwhile.
pub(crate) async fn copy_cursor_files(
    state: &CoreState,
    key: &PartitionKey,
    p: &crate::core::OwnedPartition,
    files: Vec<(String, Vec<u8>)>,
) {
    let durable_end = p.log().durable_end();
    for (child, bytes) in files.into_iter().take(MAX_COPIED_CURSOR_FILES) {
        let link_epoch = state
            .meta
            .borrow()
            .fanout_links
            .of_child(&child)
            .filter(|l| l.parent == key.0)
            .map(|l| l.epoch.clone());
        let usable = fanout::offset_file::CursorFile::decode(&bytes)
            .is_some_and(|f| Some(&f.epoch) == link_epoch.as_ref() && f.next_offset <= durable_end);
        if !usable || p.holds_cursor_file(&child, &bytes) {
            continue;
        }
        if let Err(e) = p.store_cursor_file(&child, bytes).await {
            tracing::warn!(topic = %key.0, partition = key.1, %child, error = %e, "copying the leader's fan-out cursor file");
        }
    }
}
