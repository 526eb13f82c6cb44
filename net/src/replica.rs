//! Replication on a core (issue #18): what this core's replica of each replicated partition
//! does, as the metastore says (`meta::replication`).
//!
//! - **Leader.** Starts its epoch (`Partition::become_leader`: recorded in `leader-epochs`,
//!   stamped into every batch after, producer state rebuilt), then serves clients. It answers
//!   its followers' fetches (`ReplicaFetchMany`: all the partitions one follower core
//!   follows from this core, within `REPLICA_FETCH_RESPONSE_MAX_BYTES`; `serve_fetch_many`)
//!   with batches up to its durable end and keeps each
//!   follower's progress: the follower's fetch offset is its durable end. The high watermark
//!   is the lowest durable end among the ISR (the leader's own included), never moved back;
//!   readers and acks=all wait for it. Every `ISR_CHECK_INTERVAL_MS` it drops from the ISR a
//!   follower that has not caught up for `replica.lag.time.max.ms`, and a follower outside
//!   it that reached the high watermark is added back (`Command::AlterIsr`, one change in
//!   flight per partition).
//! - **Follower.** First truncates: it asks the leader where its own newest epoch ends there
//!   (`LeaderEpochEnd`, Kafka's OffsetForLeaderEpoch) and cuts its log there (close, a
//!   `truncate-to` request, reopen), so it never keeps records the leader does not have.
//!   Then this core's fetcher for its leader's core (`crate::replica_fetcher`) copies it
//!   with the others it follows from there: it appends what comes through the same durable
//!   path as a produce (fdatasync before the next fetch reports it), and takes the leader's
//!   high watermark as its own. Every `CURSOR_COPY_INTERVAL_MS` it also stores the fan-out
//!   cursor files the leader's answer carries (those of a current link's epoch, at or below
//!   its durable end), so a cursor resumes near where it stood when this replica leads.
//! - **Offline** (no leader): nothing is served or fetched until the metastore elects one.
//!
//! A role lasts until the metastore changes it; each role's task stops when the generation
//! it started with is gone. A per-partition lock keeps a follower's append and a new
//! leader's epoch start apart, so an epoch never starts in the middle of a copy.
//!
//! Bounds: one `Replica` per replicated partition this core holds (at most `max-partitions`);
//! one task per role; one fetch in flight per (follower core, leader core), its answer at
//! most `MAX_REPLICA_FETCH_RESPONSE_BYTES`.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use glommio::sync::Semaphore;
use meta::{Assignment, Command};

use crate::core::{CoreState, PartitionKey};
use crate::node_rpc::{NodeRequest, NodeResponse, ReplicaFetchAnswer, ReplicaFetchPartition};
use crate::replica_state::{desired_roles, FollowerProgress, HandBack, Replica, Role};
use crate::replica_state::{
    MAX_PARTITIONS_PER_REPLICA_FETCH, REPLICA_FETCH_MAX_BYTES, REPLICA_FETCH_MAX_WAIT_MS,
    REPLICA_FETCH_RESPONSE_MAX_BYTES, REPLICA_RETRY_BACKOFF_MS,
};

/// How often a leader looks for followers to drop from the ISR.
pub const ISR_CHECK_INTERVAL_MS: u64 = 250;
/// A leader's pause after the metastore refused its ISR change, before it proposes another.
pub const ISR_REFUSED_BACKOFF_MS: u64 = 1_000;

/// How a follower's log is cut.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Every record from this offset on goes.
    At(u64),
    /// Every record goes; the log starts over, empty, at this offset.
    RestartAt(u64),
}

/// A client's `current_leader_epoch` (KIP-320; -1: not given) checked against the epoch
/// this core serves `topic`/`partition` at; that epoch, or the refusal: not the leader,
/// FENCED_LEADER_EPOCH (the client's is older: its metadata is stale) or
/// UNKNOWN_LEADER_EPOCH (newer: this broker has not heard of it yet).
pub fn check_leader_epoch(
    state: &CoreState,
    topic: &str,
    partition: u32,
    current_leader_epoch: i32,
) -> Result<i32, i16> {
    let epoch = state
        .serving_epoch(topic, partition)
        .ok_or(crate::codes::NOT_LEADER_OR_FOLLOWER)?;
    match current_leader_epoch {
        c if c < 0 || c == epoch => Ok(epoch),
        c if c < epoch => Err(crate::codes::FENCED_LEADER_EPOCH),
        _ => Err(crate::codes::UNKNOWN_LEADER_EPOCH),
    }
}

/// Why an acks=all produce to `key` is refused before its append: fewer in-sync
/// replicas than its topic's `min.insync.replicas`.
pub fn check_min_insync(state: &CoreState, key: &PartitionKey) -> Option<String> {
    let m = state.meta.borrow();
    let set = m.replica_set(&key.0, key.1)?;
    let min = m
        .topic(&key.0)
        .map_or(1, |t| crate::topic_config::min_insync_replicas(&t.configs));
    (set.isr.len() < min).then(|| {
        format!(
            "{}/{}: {} in-sync replicas ({:?}), min.insync.replicas is {min}",
            key.0,
            key.1,
            set.isr.len(),
            set.isr
        )
    })
}

/// acks=all on a replicated partition: waits until the high watermark covers
/// `last_offset` (every in-sync replica has it durably), within `timeout_ms`. Refused
/// when this core stops leading meanwhile, or the ISR shrank below `min.insync.replicas`.
pub async fn wait_replicated(
    state: &CoreState,
    key: &PartitionKey,
    part: &crate::core::OwnedPartition,
    last_offset: u64,
    timeout_ms: u64,
) -> Result<(), (i16, String)> {
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    loop {
        if part.log().high_watermark() > last_offset {
            // Every in-sync replica has it; but fewer of them than promised is no ack.
            return match check_min_insync(state, key) {
                Some(why) => Err((crate::codes::NOT_ENOUGH_REPLICAS_AFTER_APPEND, why)),
                None => Ok(()),
            };
        }
        if part.log().is_poisoned() {
            return Err((
                crate::codes::KAFKA_STORAGE_ERROR,
                format!("{}/{}: the leader's log failed", key.0, key.1),
            ));
        }
        if !state.leads(&key.0, key.1) {
            return Err((
                crate::codes::NOT_LEADER_OR_FOLLOWER,
                format!(
                    "{}/{}: leadership moved before the in-sync replicas had offset {last_offset}",
                    key.0, key.1
                ),
            ));
        }
        if let Some(why) = check_min_insync(state, key) {
            return Err((crate::codes::NOT_ENOUGH_REPLICAS_AFTER_APPEND, why));
        }
        if Instant::now() >= deadline {
            return Err((
                crate::codes::REQUEST_TIMED_OUT,
                format!("{}/{}: the in-sync replicas did not have offset {last_offset} within {timeout_ms} ms", key.0, key.1),
            ));
        }
        // Woken by the high watermark's moves; a leadership or ISR change is seen within
        // the check interval.
        let step = deadline.min(Instant::now() + Duration::from_millis(ISR_CHECK_INTERVAL_MS));
        part.log().wait_for_data_after(last_offset, step).await;
    }
}

/// Refuses a write the broker makes itself (a transaction or barrier marker) to a
/// replicated partition this core does not lead with its epoch started.
pub fn check_leads(state: &CoreState, topic: &str, partition: u32) -> Result<(), (i16, String)> {
    if state.leads(topic, partition) {
        return Ok(());
    }
    Err((
        crate::codes::NOT_LEADER_OR_FOLLOWER,
        format!("{topic}/{partition}: this replica is not the leader (yet)"),
    ))
}

/// After a write the broker makes itself (a transaction or barrier marker) at
/// `last_offset` of a partition this core leads: for a replicated partition it counts once
/// every in-sync replica has it (as acks=all, within `request-timeout-ms`), so a failover
/// cannot lose it.
pub async fn replicate_own_write(
    state: &CoreState,
    key: &PartitionKey,
    part: &crate::core::OwnedPartition,
    last_offset: u64,
) -> Result<(), (i16, String)> {
    if state.meta.borrow().replica_set(&key.0, key.1).is_none() {
        return Ok(());
    }
    advance_high_watermark(state, key);
    let timeout_ms = state.ctx.config.request_timeout_ms;
    wait_replicated(state, key, part, last_offset, timeout_ms).await
}

/// After a coordinator's write (offsets, transaction or barrier state) at `last_offset` of its internal
/// partition: `replicate_own_write`, its refusal as the coordinator error Kafka answers
/// (NOT_COORDINATOR once leadership moved or the log failed, COORDINATOR_NOT_AVAILABLE
/// while the in-sync replicas lag), so a commit is acknowledged only once a failover
/// cannot lose it.
pub async fn replicate_coordinator_write(
    state: &CoreState,
    key: &PartitionKey,
    part: &crate::core::OwnedPartition,
    last_offset: u64,
) -> Result<(), i16> {
    replicate_own_write(state, key, part, last_offset)
        .await
        .map_err(|(code, why)| {
            tracing::warn!(topic = %key.0, partition = key.1, code, %why, "coordinator write not replicated");
            match code {
                crate::codes::NOT_LEADER_OR_FOLLOWER | crate::codes::KAFKA_STORAGE_ERROR => {
                    crate::codes::NOT_COORDINATOR
                }
                _ => crate::codes::COORDINATOR_NOT_AVAILABLE,
            }
        })
}

/// A coordinator's write of `batch` to its internal partition `key` (`__consumer_offsets`,
/// `__transaction_state`, `__barrier_state`), open on this core as `part`: appended with
/// `durability`, and when that is `Sync` counted once every in-sync replica has it
/// (`replicate_coordinator_write`); a buffered one is copied with the next durable one.
/// The last offset, or the Kafka code and what failed.
pub async fn coordinator_append(
    state: &CoreState,
    key: &PartitionKey,
    part: &crate::core::OwnedPartition,
    batch: &[u8],
    durability: engine::Durability,
) -> Result<u64, (i16, String)> {
    let appended = part.log().append(batch, durability).await.map_err(|e| {
        (
            crate::codes::for_log_error(&e),
            format!("appending to {}/{}: {e}", key.0, key.1),
        )
    })?;
    if durability == engine::Durability::Sync {
        replicate_coordinator_write(state, key, part, appended.last_offset)
            .await
            .map_err(|code| {
                (
                    code,
                    format!("{}/{}: the in-sync replicas do not have it", key.0, key.1),
                )
            })?;
    }
    Ok(appended.last_offset)
}

/// Releases this core's `topic`/`index` for a move to another core
/// (`partition_move::move_to_core`): under its replica's role lock, so no follower copy
/// or epoch start is in flight as it closes (a partition not replicated has no one else
/// taking the lock).
pub(crate) async fn release_for_move(
    state: &CoreState,
    topic: &str,
    index: u32,
) -> Result<(), String> {
    let lock = state.role_lock(&(topic.to_string(), index));
    let _held = lock
        .acquire_permit(1)
        .await
        .map_err(|_| "the replica's lock is closed".to_string())?;
    crate::opening::release_partition(state, topic, index)
        .await
        .map_err(|e| e.to_string())
}

/// Follows the metastore: every replica whose role changed gets a new generation and
/// the role's task; replicas no longer here are forgotten (their tasks stop). Leaders'
/// high watermarks are recomputed (an ISR that shrank may let them move).
pub(crate) fn reconcile_replicas(state: &Rc<CoreState>) {
    let desired = desired_roles(&state.meta.borrow(), state.node_id(), state.core as u32);
    let mut started = Vec::new();
    {
        let mut reps = state.data.replicas.borrow_mut();
        reps.map.retain(|k, _| desired.contains_key(k));
        reps.locks.retain(|k, _| desired.contains_key(k));
        for (key, role) in desired {
            if reps.map.get(&key).is_some_and(|r| r.role == role) {
                continue;
            }
            reps.next_generation += 1;
            let generation = reps.next_generation;
            tracing::info!(topic = %key.0, partition = key.1, core = state.core, ?role, "replica role");
            // A coordinator's state is loaded again by the leader's task (`lead`); a
            // follower coordinates nothing of the partition.
            crate::coordinator_load::drop_coordinator_state(state, &key);
            reps.map.insert(
                key.clone(),
                Replica {
                    role,
                    generation,
                    ready: false,
                    since: Instant::now(),
                    followers: HashMap::new(),
                    proposed_isr: None,
                },
            );
            started.push((key, role, generation));
        }
        if !reps.isr_loop_started && !reps.map.is_empty() {
            reps.isr_loop_started = true;
            let me = state.clone();
            glommio::spawn_local(async move { isr_loop(me).await }).detach();
        }
    }
    for (key, role, generation) in started {
        let me = state.clone();
        match role {
            Role::Leader { epoch } => {
                glommio::spawn_local(async move { lead(me, key, epoch, generation).await })
                    .detach();
            }
            Role::Follower { epoch, leader } => {
                glommio::spawn_local(
                    async move { follow(me, key, epoch, leader, generation).await },
                )
                .detach();
            }
            Role::Offline { .. } => {}
        }
    }
    advance_every_high_watermark(state);
}

/// `advance_high_watermark` for every partition this core leads.
fn advance_every_high_watermark(state: &CoreState) {
    let leaders: Vec<PartitionKey> = state
        .data
        .replicas
        .borrow()
        .map
        .iter()
        .filter(|(_, r)| r.ready)
        .map(|(k, _)| k.clone())
        .collect();
    for key in leaders {
        advance_high_watermark(state, &key);
    }
}

/// The leader's task: start the epoch, then serve.
async fn lead(state: Rc<CoreState>, key: PartitionKey, epoch: i32, generation: u64) {
    let lock = state.role_lock(&key);
    loop {
        if !state.current(&key, generation) {
            return;
        }
        let Some(p) = crate::opening::partition(&state, &key.0, key.1).await else {
            glommio::timer::sleep(Duration::from_millis(REPLICA_RETRY_BACKOFF_MS)).await;
            continue;
        };
        let Ok(_held) = lock.acquire_permit(1).await else {
            return;
        };
        if !state.current(&key, generation) {
            return;
        }
        let started = match p.become_leader(epoch).await {
            Ok(()) => crate::coordinator_load::load_coordinator_state(&state, &key, &p)
                .await
                .map_err(engine::PartitionError::from),
            other => other,
        };
        match started {
            Ok(()) => break,
            Err(e) => {
                tracing::error!(topic = %key.0, partition = key.1, epoch, error = %e, "cannot start the leader epoch");
                glommio::timer::sleep(Duration::from_millis(REPLICA_RETRY_BACKOFF_MS)).await;
            }
        }
    }
    if let Some(r) = state.data.replicas.borrow_mut().map.get_mut(&key) {
        if r.generation == generation {
            r.ready = true;
            r.since = Instant::now();
        }
    }
    tracing::info!(topic = %key.0, partition = key.1, epoch, "leading");
    advance_high_watermark(&state, &key);
}

/// A leader's high watermark: the lowest durable end among the ISR (the leader's own
/// included); it never moves back. Readers and acks=all waiters are woken by the log.
pub fn advance_high_watermark(state: &CoreState, key: &PartitionKey) {
    let Some(p) = state.partition_if_open(&key.0, key.1) else {
        return;
    };
    let m = state.meta.borrow();
    let Some(set) = m.replica_set(&key.0, key.1) else {
        return;
    };
    let reps = state.data.replicas.borrow();
    let Some(rep) = reps.map.get(key).filter(|r| r.ready) else {
        return;
    };
    let current = p.log().replicated_limit().unwrap_or(0);
    let mut hwm = p.log().durable_end();
    let proposed = rep.proposed_isr.iter().flatten();
    for n in set
        .isr
        .iter()
        .chain(proposed)
        .filter(|n| **n != state.node_id())
    {
        hwm = hwm.min(rep.followers.get(n).map_or(current, |f| f.durable_end));
    }
    if hwm > current {
        p.log().set_replicated_limit(hwm);
    }
}

/// Every `ISR_CHECK_INTERVAL_MS`: the leaders' followers that have not caught up for
/// `replica.lag.time.max.ms` leave the ISR.
async fn isr_loop(state: Rc<CoreState>) {
    let lag = Duration::from_millis(state.ctx.config.replica_lag_time_max_ms);
    loop {
        glommio::timer::sleep(Duration::from_millis(ISR_CHECK_INTERVAL_MS)).await;
        let now = Instant::now();
        let shrinks: Vec<(PartitionKey, Vec<u64>)> = {
            let m = state.meta.borrow();
            let reps = state.data.replicas.borrow();
            reps.map
                .iter()
                .filter(|(_, r)| r.ready && r.proposed_isr.is_none())
                .filter_map(|(key, r)| {
                    let set = m.replica_set(&key.0, key.1)?;
                    let keep: Vec<u64> = set
                        .isr
                        .iter()
                        .copied()
                        .filter(|n| {
                            *n == state.node_id()
                                || now.saturating_duration_since(
                                    r.followers.get(n).map_or(r.since, |f| f.caught_up_at),
                                ) < lag
                        })
                        .collect();
                    (keep.len() < set.isr.len()).then(|| (key.clone(), keep))
                })
                .collect()
        };
        for (key, isr) in shrinks {
            tracing::warn!(topic = %key.0, partition = key.1, ?isr, "followers lag past replica.lag.time.max.ms: shrinking the ISR");
            propose_isr(&state, &key, isr);
        }
        // Appends that are not produces (transaction and barrier markers) move the high
        // watermark of a leader alone in its ISR here.
        advance_every_high_watermark(&state);
    }
}

/// Proposes `isr` for `key` (this core leads it), one change in flight per partition.
fn propose_isr(state: &Rc<CoreState>, key: &PartitionKey, isr: Vec<u64>) {
    let (leader_epoch, partition_epoch) = {
        let m = state.meta.borrow();
        let Some(set) = m.replica_set(&key.0, key.1) else {
            return;
        };
        (set.leader_epoch, set.partition_epoch)
    };
    {
        let mut reps = state.data.replicas.borrow_mut();
        let Some(r) = reps.map.get_mut(key) else {
            return;
        };
        if r.proposed_isr.is_some() {
            return;
        }
        r.proposed_isr = Some(isr.clone());
    }
    let me = state.clone();
    let key = key.clone();
    glommio::spawn_local(async move {
        let cmd = Command::AlterIsr {
            name: key.0.clone(),
            partition: key.1,
            leader_epoch,
            partition_epoch,
            isr: isr.clone(),
        };
        match me.ctx.meta.write(cmd).await {
            Ok(applied) => {
                // Seen here before another change is proposed from the same epochs.
                me.wait_applied(applied.log_index).await;
                tracing::info!(topic = %key.0, partition = key.1, ?isr, "ISR changed");
            }
            Err(e) => {
                tracing::info!(topic = %key.0, partition = key.1, error = %e, "ISR change refused");
                // Not again at once: the metastore may be ahead of this copy.
                glommio::timer::sleep(Duration::from_millis(ISR_REFUSED_BACKOFF_MS)).await;
            }
        }
        if let Some(r) = me.data.replicas.borrow_mut().map.get_mut(&key) {
            r.proposed_isr = None;
        }
    })
    .detach();
}

/// A follower's fetch of one partition reached this core's leader: record its progress,
/// move the high watermark, add it back to the ISR once it caught up, and answer its
/// batches (at most `max_bytes`, or one larger batch) without waiting.
async fn serve_fetch_now(
    state: &Rc<CoreState>,
    node: u64,
    part: &ReplicaFetchPartition,
    max_bytes: usize,
) -> ReplicaFetchAnswer {
    let key = (part.topic.clone(), part.partition);
    let fetch_offset = part.fetch_offset;
    if let Some(refused) = refuse_unless_leading(state, &key, part.leader_epoch) {
        return match refused {
            NodeResponse::NotLeader { current } => ReplicaFetchAnswer::NotLeader { current },
            _ => ReplicaFetchAnswer::NotLeader { current: None },
        };
    }
    // Only another replica of the partition counts as a follower.
    let follower = node != state.node_id()
        && state
            .meta
            .borrow()
            .replica_set(&key.0, key.1)
            .is_some_and(|r| r.replica_on(node).is_some());
    if !follower {
        return ReplicaFetchAnswer::Failed {
            reason: format!("node {node} holds no replica of {}/{}", key.0, key.1),
        };
    }
    let Some(p) = state.partition_if_open(&key.0, key.1) else {
        return ReplicaFetchAnswer::NotServed;
    };
    if p.incarnation() != part.incarnation {
        return ReplicaFetchAnswer::NotServed;
    }
    let log = p.log().clone();
    if fetch_offset > log.durable_end() {
        return ReplicaFetchAnswer::Diverging {
            leader_end: log.durable_end(),
        };
    }
    // A follower that starts over does so at the base of the batch holding the log
    // start (DeleteRecords may have put it inside a batch), and is served from there.
    let start = log.log_start_offset();
    if fetch_offset < start {
        let batch_base = match log.read_durable(start, 1).await {
            Ok(b) => engine::batch::stored_batches(&b)
                .next()
                .map_or(start, |(h, _)| (h.base_offset.max(0) as u64).min(start)),
            Err(_) => start,
        };
        if fetch_offset != batch_base {
            return ReplicaFetchAnswer::BelowLogStart {
                log_start: batch_base,
            };
        }
    }
    let read_from = fetch_offset.max(start);
    // Idle at the log end counts as caught up (Kafka's lastCaughtUpTime).
    record_progress(state, &key, node, fetch_offset, log.log_end_offset());
    advance_high_watermark(state, &key);
    maybe_expand_isr(state, &key, node, fetch_offset, &p);
    let max_bytes = max_bytes.clamp(1, REPLICA_FETCH_MAX_BYTES as usize);
    match log.read_durable(read_from, max_bytes).await {
        Ok(bytes) => ReplicaFetchAnswer::Records {
            bytes,
            high_watermark: log.high_watermark(),
            log_start: log.log_start_offset(),
            cursor_files: p.stored_cursor_files(),
        },
        Err(e) => ReplicaFetchAnswer::Failed {
            reason: e.to_string(),
        },
    }
}

/// A follower core's fetch of several partitions this core leads (`ReplicaFetchMany`):
/// each answered as [`replica::serve_fetch_now`] does, in order, within `max_bytes` in all
/// (the partitions past it are `Skipped`); when none has records or a cut to make (a
/// refusal waits too), waits up to `max_wait_ms` for records past any fetch offset, then
/// answers again.
pub(crate) async fn serve_fetch_many(
    state: &Rc<CoreState>,
    node: u64,
    max_bytes: u32,
    max_wait_ms: u32,
    parts: &[ReplicaFetchPartition],
) -> Vec<ReplicaFetchAnswer> {
    let deadline =
        Instant::now() + Duration::from_millis(max_wait_ms.min(REPLICA_FETCH_MAX_WAIT_MS) as u64);
    loop {
        let mut budget = (max_bytes as usize).clamp(1, REPLICA_FETCH_RESPONSE_MAX_BYTES);
        let mut answers = Vec::with_capacity(parts.len());
        let mut news = false;
        for part in parts.iter().take(MAX_PARTITIONS_PER_REPLICA_FETCH) {
            if budget == 0 {
                answers.push(ReplicaFetchAnswer::Skipped);
                continue;
            }
            let a = serve_fetch_now(state, node, part, budget.min(part.max_bytes as usize)).await;
            // Records, or a cut the follower must make, end the wait; a refusal (no
            // leader yet, not served here) does not, so a follower never spins on it.
            match &a {
                ReplicaFetchAnswer::Records {
                    bytes,
                    cursor_files,
                    ..
                } => {
                    // The cursor files it carries count too.
                    let carried: usize = cursor_files
                        .iter()
                        .map(|(child, file)| child.len() + file.len())
                        .sum::<usize>()
                        + bytes.len();
                    budget = budget.saturating_sub(carried);
                    news |= !bytes.is_empty();
                }
                ReplicaFetchAnswer::Diverging { .. } | ReplicaFetchAnswer::BelowLogStart { .. } => {
                    news = true
                }
                _ => {}
            }
            answers.push(a);
        }
        answers.resize(parts.len(), ReplicaFetchAnswer::Skipped);
        if news || Instant::now() >= deadline {
            return answers;
        }
        // Nothing yet: wait for the first partition whose durable end passes its fetch
        // offset (each wait ends at the deadline at the latest).
        let logs: Vec<(Rc<engine::PartitionLog>, u64)> = parts
            .iter()
            .take(MAX_PARTITIONS_PER_REPLICA_FETCH)
            .filter_map(|part| {
                let p = state.partition_if_open(&part.topic, part.partition)?;
                Some((p.log().clone(), part.fetch_offset))
            })
            .collect();
        if logs.is_empty() {
            glommio::timer::sleep(deadline.saturating_duration_since(Instant::now())).await;
            continue;
        }
        let mut waits: Vec<_> = logs
            .iter()
            .map(|(log, offset)| Box::pin(log.wait_for_durable_after(*offset, deadline)))
            .collect();
        use std::future::Future;
        futures_lite::future::poll_fn(|cx| {
            for w in waits.iter_mut() {
                if w.as_mut().poll(cx).is_ready() {
                    return std::task::Poll::Ready(());
                }
            }
            std::task::Poll::Pending
        })
        .await;
    }
}

fn refuse_unless_leading(
    state: &CoreState,
    key: &PartitionKey,
    leader_epoch: i32,
) -> Option<NodeResponse> {
    let reps = state.data.replicas.borrow();
    match reps.map.get(key) {
        Some(r)
            if r.ready
                && r.role
                    == Role::Leader {
                        epoch: leader_epoch,
                    } =>
        {
            None
        }
        Some(r) => Some(NodeResponse::NotLeader {
            current: match r.role {
                Role::Leader { epoch } | Role::Follower { epoch, .. } | Role::Offline { epoch } => {
                    Some(epoch)
                }
            },
        }),
        None => Some(NodeResponse::NotLeader { current: None }),
    }
}

fn record_progress(state: &CoreState, key: &PartitionKey, node: u64, fetch_offset: u64, leo: u64) {
    let now = Instant::now();
    let mut reps = state.data.replicas.borrow_mut();
    let Some(r) = reps.map.get_mut(key) else {
        return;
    };
    let since = r.since;
    let f = r.followers.entry(node).or_insert(FollowerProgress {
        durable_end: fetch_offset,
        caught_up_at: since,
        last_fetch_leo: u64::MAX,
        last_fetch_at: now,
    });
    f.durable_end = fetch_offset;
    if fetch_offset >= leo {
        f.caught_up_at = now;
    } else if fetch_offset >= f.last_fetch_leo {
        // It has what the leader had at its previous fetch: caught up as of then.
        f.caught_up_at = f.caught_up_at.max(f.last_fetch_at);
    }
    f.last_fetch_leo = leo;
    f.last_fetch_at = now;
}

fn maybe_expand_isr(
    state: &Rc<CoreState>,
    key: &PartitionKey,
    node: u64,
    fetch_offset: u64,
    p: &crate::core::OwnedPartition,
) {
    let isr = {
        let m = state.meta.borrow();
        let Some(set) = m.replica_set(&key.0, key.1) else {
            return;
        };
        let fenced = m.brokers.get(&node).is_none_or(|b| b.fenced);
        if set.in_sync(node) || fenced {
            return;
        }
        // Caught up with what is committed, and past the start of this epoch.
        let epoch_start = p
            .leader_epoch_end(set.leader_epoch - 1)
            .map_or(0, |(_, end)| end);
        let hwm = p.log().high_watermark();
        if fetch_offset < hwm || fetch_offset < epoch_start {
            return;
        }
        let mut isr = set.isr.clone();
        isr.push(node);
        isr
    };
    tracing::info!(topic = %key.0, partition = key.1, node, "a follower caught up: expanding the ISR");
    propose_isr(state, key, isr);
}

/// The follower's task: truncate to what the leader has, then hand the partition to
/// this core's fetcher for its leader (`crate::replica_fetcher`), which copies it with
/// the others this core follows from there until the log must be cut again.
async fn follow(
    state: Rc<CoreState>,
    key: PartitionKey,
    epoch: i32,
    leader: Assignment,
    generation: u64,
) {
    let backoff = || glommio::timer::sleep(Duration::from_millis(REPLICA_RETRY_BACKOFF_MS));
    let lock = state.role_lock(&key);
    loop {
        if !state.current(&key, generation) {
            return;
        }
        if crate::opening::partition(&state, &key.0, key.1)
            .await
            .is_none()
        {
            backoff().await;
            continue;
        }
        if let Err(why) = truncate_to_leader(&state, &key, epoch, leader, &lock, generation).await {
            tracing::debug!(topic = %key.0, partition = key.1, %why, "follower truncation not done yet");
            backoff().await;
            continue;
        }
        let handed_back =
            crate::replica_fetcher::join_fetcher(&state, leader, key.clone(), epoch, generation)
                .recv_async()
                .await;
        match handed_back {
            // The fetcher let it go: its role ended.
            Err(_) => continue,
            Ok(HandBack::Truncate) => backoff().await,
            Ok(HandBack::RestartAt(log_start)) => {
                // The leader deleted what this replica lacks (retention during a long
                // outage): it starts over, empty, at the leader's log start.
                let Ok(_held) = lock.acquire_permit(1).await else {
                    return;
                };
                if !state.current(&key, generation) {
                    return;
                }
                if let Err(why) = reopen_cut(&state, &key, Cut::RestartAt(log_start)).await {
                    tracing::warn!(topic = %key.0, partition = key.1, %why, "starting the replica over");
                    drop(_held);
                    backoff().await;
                }
            }
        }
    }
}

/// Cuts this follower's log where its newest epoch ends on the leader (Kafka's
/// OffsetForLeaderEpoch truncation).
async fn truncate_to_leader(
    state: &CoreState,
    key: &PartitionKey,
    epoch: i32,
    leader: Assignment,
    lock: &Rc<Semaphore>,
    generation: u64,
) -> Result<(), String> {
    // Held from the first look at the log to the cut: a copy of the previous role's
    // task cannot extend the log in between.
    let _held = lock.acquire_permit(1).await.map_err(|_| "closed")?;
    if !state.current(key, generation) {
        return Err("the role changed".into());
    }
    let p = state.partition_if_open(&key.0, key.1).ok_or("not open")?;
    let Some(mine) = p.latest_leader_epoch() else {
        return Ok(());
    };
    let req = NodeRequest::LeaderEpochEnd {
        topic: key.0.clone(),
        partition: key.1,
        leader_epoch: epoch,
        epoch: mine,
    };
    let resp = crate::node_rpc::call(state, leader.node_id, leader.core_index, &req)
        .await
        .map_err(|e| e.to_string())?;
    let end = p.log().log_end_offset();
    let target = match resp {
        NodeResponse::EpochEnd {
            epoch_end: Some((theirs, their_end)),
        } => {
            let mine_end = if theirs < mine {
                p.leader_epoch_end(theirs).map_or(0, |(_, e)| e)
            } else {
                end
            };
            their_end.min(mine_end)
        }
        // The leader knows no epoch this old: keep only what was committed.
        NodeResponse::EpochEnd { epoch_end: None } => p.log().replicated_limit().unwrap_or(0),
        other => return Err(format!("leader answered {other:?}")),
    };
    let target = target.min(end);
    if target >= end {
        return Ok(());
    }
    if !state.current(key, generation) {
        return Err("the role changed".into());
    }
    drop(p);
    tracing::warn!(topic = %key.0, partition = key.1, from = end, to = target, "truncating a follower to its leader's log");
    reopen_cut(state, key, Cut::At(target)).await
}

/// Closes `key`, has it cut and opens it again (recovery does the cut).
async fn reopen_cut(state: &CoreState, key: &PartitionKey, cut: Cut) -> Result<(), String> {
    state.data.truncating.borrow_mut().insert(key.clone());
    let result = async {
        let old = state
            .data.partitions
            .borrow_mut()
            .remove(key)
            .ok_or("not open")?;
        let incarnation = old.incarnation().to_string();
        let dir = old.dir().to_path_buf();
        if let Err(e) = old.close().await {
            tracing::warn!(topic = %key.0, partition = key.1, error = %e, "closing a partition to truncate it");
        }
        drop(old);
        match cut {
            Cut::At(offset) => engine::log::request_truncation(&dir, offset).await,
            Cut::RestartAt(offset) => engine::log::request_restart_at(&dir, offset).await,
        }
        .map_err(|e| format!("asking for the truncation: {e}"))?;
        match crate::opening::open_partition(state, &key.0, key.1, &incarnation).await {
            Ok(p) => {
                state.data.partitions.borrow_mut().insert(key.clone(), Rc::new(p));
                Ok(())
            }
            Err(e) => {
                // The next use opens it again (and finds the cut done or still asked).
                state.data.openings.add(key.clone(), incarnation);
                Err(format!("reopening after the truncation: {e}"))
            }
        }
    }
    .await;
    state.data.truncating.borrow_mut().remove(key);
    result
}

/// The node calls of replication, answered on the core of this node that holds the replica.
pub async fn serve_node_request(state: &Rc<CoreState>, req: NodeRequest) -> NodeResponse {
    if let NodeRequest::ReplicaFetchMany {
        replica_node,
        leader_core,
        max_bytes,
        max_wait_ms,
        partitions,
    } = req
    {
        let core = leader_core as usize;
        if core >= state.shards.cores() || partitions.len() > MAX_PARTITIONS_PER_REPLICA_FETCH {
            return NodeResponse::Failed {
                reason: format!(
                    "a fetch of {} partitions from core {core} (this node runs {} cores; at most {MAX_PARTITIONS_PER_REPLICA_FETCH} partitions a fetch)",
                    partitions.len(),
                    state.shards.cores()
                ),
            };
        }
        let served = crate::route::on_core(state, core, move |s: Rc<CoreState>| async move {
            let answers =
                serve_fetch_many(&s, replica_node, max_bytes, max_wait_ms, &partitions).await;
            NodeResponse::ReplicaBatch { answers }
        })
        .await;
        return served.unwrap_or(NodeResponse::NotServed);
    }
    let (topic, partition) = match &req {
        NodeRequest::LeaderEpochEnd {
            topic, partition, ..
        } => (topic.clone(), *partition),
        // The fetch of one partition an earlier build's follower sends: every node of a
        // cluster runs one build.
        NodeRequest::ReplicaFetch { .. } => {
            return NodeResponse::Failed {
                reason: "ReplicaFetch is replaced by ReplicaFetchMany: run one build on every node of the cluster".into(),
            }
        }
        other => {
            return NodeResponse::Failed {
                reason: format!("not a replication call: {other:?}"),
            }
        }
    };
    let core = state
        .meta
        .borrow()
        .replica_set(&topic, partition)
        .and_then(|r| r.replica_on(state.node_id()))
        .map(|a| a.core_index as usize);
    let Some(core) = core.filter(|c| *c < state.shards.cores()) else {
        return NodeResponse::NotServed;
    };
    let served = crate::route::on_core(state, core, move |s: Rc<CoreState>| async move {
        let key = (topic, partition);
        match req {
            NodeRequest::LeaderEpochEnd {
                leader_epoch,
                epoch,
                ..
            } => {
                if let Some(refused) = refuse_unless_leading(&s, &key, leader_epoch) {
                    return refused;
                }
                match s.partition_if_open(&key.0, key.1) {
                    Some(p) => NodeResponse::EpochEnd {
                        epoch_end: p.leader_epoch_end(epoch),
                    },
                    None => NodeResponse::NotServed,
                }
            }
            _ => unreachable!("matched above"),
        }
    })
    .await;
    served.unwrap_or(NodeResponse::NotServed)
}
