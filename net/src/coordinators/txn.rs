//! The transaction coordinator's work: running a request on the core that owns its
//! transactional id, appending the id's state to `__transaction_state` (one change at a time,
//! `TxnEntry::busy`), writing commit and abort markers to every partition of a transaction
//! (cross-core through `route`, cross-node through node RPC), the transactional offsets, and
//! the tick that aborts timed-out transactions and finishes the ones a crash left prepared.
//! The state machine is `crate::txn`.

use crate::codes::{
    self, CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST, NONE, NOT_LEADER_OR_FOLLOWER, PRODUCER_FENCED, UNKNOWN_TOPIC_OR_PARTITION,
};
use crate::core::CoreState;
use crate::group::{self, Committed, OFFSETS_TOPIC};
use crate::node_rpc::{NodeRequest, NodeResponse};
use crate::route::{CoordinatorAt, Scatter};
use crate::txn::{
    TxnMeta, TxnStatus, COORDINATOR_EPOCH, MAX_PARTITIONS_PER_TRANSACTION,
    MAX_TRANSACTIONAL_ID_BYTES, TXN_STATE_TOPIC,
};
use engine::join::join_all;
use engine::txn::MarkerKind;
use engine::Durability;
use std::rc::Rc;

/// Where a transactional id is coordinated (`Err`: INVALID_REQUEST for an empty or too long id).
fn coordinator_at(state: &CoreState, id: &str) -> Result<CoordinatorAt, i16> {
    if id.is_empty() || id.len() > MAX_TRANSACTIONAL_ID_BYTES {
        return Err(INVALID_REQUEST);
    }
    Ok(CoordinatorAt {
        internal: TXN_STATE_TOPIC,
        at: state.txn_coordinator(id),
        key_partition: state.txn_partition(id),
    })
}

/// Runs `f` on the core that coordinates transactional id `id`, with that core's state and the
/// coordinating partition: [`route::on_coordinator_core`](crate::route::on_coordinator_core)
/// at [`coordinator_at`]`(id)`.
pub(crate) async fn on_txn_core<R, F, Fut>(state: &Rc<CoreState>, id: &str, f: F) -> Result<R, i16>
where
    R: Send + 'static,
    F: FnOnce(Rc<CoreState>, u32) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = R> + 'static,
{
    crate::route::on_coordinator_core(state, coordinator_at(state, id)?, f).await
}

/// Appends `meta` as `id`'s newest record to its `__transaction_state` partition on this
/// core, durable before it returns, then makes it the entry's state.
pub(crate) async fn persist(
    s: &CoreState,
    id: &str,
    partition: u32,
    meta: TxnMeta,
) -> Result<(), i16> {
    persist_with(s, id, partition, meta, Durability::Sync).await
}

/// `persist` with the record's durability: `Buffered` only for a completed transaction, whose
/// loss in a crash leaves the durable prepared state, which is finished again (markers are
/// idempotent); a later durable record of the partition syncs it anyway.
pub(crate) async fn persist_with(
    s: &CoreState,
    id: &str,
    partition: u32,
    meta: TxnMeta,
    durability: Durability,
) -> Result<(), i16> {
    append_record(s, id, partition, Some(&meta), durability).await?;
    if let Some(e) = s.coordinators.txns.borrow_mut().get_mut(id) {
        e.meta = meta;
    }
    Ok(())
}

/// Appends `id`'s record (`None`: a tombstone, the id forgotten) to its `__transaction_state`
/// partition on this core, durable before it returns with `Durability::Sync`.
pub(crate) async fn append_record(
    s: &CoreState,
    id: &str,
    partition: u32,
    meta: Option<&TxnMeta>,
    durability: Durability,
) -> Result<(), i16> {
    s.check_coordinates(TXN_STATE_TOPIC, partition)?;
    let Some(part) = crate::opening::partition(s, TXN_STATE_TOPIC, partition).await else {
        return Err(COORDINATOR_NOT_AVAILABLE);
    };
    let batch = engine::batch_encode::encode_uncompressed([engine::batch_encode::NewRecord {
        key: Some(crate::txn::encode_key(id)),
        value: meta.map(crate::txn::encode_value),
        headers: Default::default(),
        timestamp_ms: engine::clock::system_now_ms(),
    }]);
    // A buffered record (a completed transaction) is copied with the next durable one.
    let key = (TXN_STATE_TOPIC.to_string(), partition);
    crate::replica::coordinator_append(s, &key, &part, &batch, durability)
        .await
        .map_err(|(code, why)| {
            tracing::warn!(transactional_id = %id, error = %why, "persisting transaction state failed");
            code
        })?;
    Ok(())
}

/// Takes `id` for one transition: `Err(CONCURRENT_TRANSACTIONS)` while another runs.
pub(crate) fn take(s: &CoreState, id: &str) -> Result<TxnMeta, i16> {
    let mut txns = s.coordinators.txns.borrow_mut();
    let Some(e) = txns.get_mut(id) else {
        return Err(INVALID_PRODUCER_ID_MAPPING);
    };
    if e.busy {
        return Err(CONCURRENT_TRANSACTIONS);
    }
    e.busy = true;
    Ok(e.meta.clone())
}

pub(crate) fn release(s: &CoreState, id: &str) {
    if let Some(e) = s.coordinators.txns.borrow_mut().get_mut(id) {
        e.busy = false;
    }
}

/// Writes `kind` markers of producer `pid` at `epoch` to `partitions`, each on its owner core;
/// on a `__consumer_offsets` partition the producer's pending transactional offsets are then
/// committed or dropped. One result per partition, in order: `Err((code, why))` when it could
/// not be written (`None` when the partition does not exist: nothing left to mark).
pub(crate) async fn mark_partitions(
    state: &Rc<CoreState>,
    pid: i64,
    epoch: i16,
    kind: MarkerKind,
    coordinator_epoch: i32,
    partitions: &[(String, u32)],
) -> Vec<Option<Result<(), (i16, String)>>> {
    let mut out: Vec<Option<Result<(), (i16, String)>>> = vec![None; partitions.len()];
    let mut scatter: Scatter<(String, u32)> = Scatter::default();
    let mut remote = Vec::new();
    for (i, (topic, p)) in partitions.iter().enumerate() {
        match (state.owner_core(topic, *p), state.remote_owner(topic, *p)) {
            (Some(core), _) => scatter.push(core, (i, 0), (topic.clone(), *p)),
            (None, Some(owner)) => remote.push((i, owner, topic.clone(), *p)),
            (None, None) => {
                tracing::debug!(%topic, partition = p, "marker for a partition that is gone")
            }
        }
    }
    // Partitions of other nodes: one node RPC each, concurrently with the local ones below.
    let remote_results = join_all(remote.into_iter().map(|(i, owner, topic, p)| async move {
        let req = NodeRequest::TxnMarker {
            topic: topic.clone(),
            partition: p,
            producer_id: pid,
            epoch,
            commit: kind == MarkerKind::Commit,
            coordinator_epoch,
        };
        (i, ask_owner(state, owner, &topic, p, &req).await)
    }));
    let results = scatter
        .gather(state, move |s, items: Vec<(String, u32)>| async move {
            // The partitions of one core are marked concurrently: their fdatasyncs overlap.
            join_all(items.into_iter().map(|(topic, p)| {
                let s = s.clone();
                async move {
                    crate::replica::check_leads(&s, &topic, p)?;
                    let Some(part) = crate::opening::partition(&s, &topic, p).await else {
                        return Err((
                            codes::NOT_LEADER_OR_FOLLOWER,
                            format!("{topic}/{p} is not open on core {}", s.core),
                        ));
                    };
                    let at = part
                        .write_marker(pid, epoch, kind, coordinator_epoch)
                        .await
                        .map_err(|e| {
                            (codes::for_partition_error(&e), format!("{topic}/{p}: {e}"))
                        })?;
                    crate::replica::replicate_own_write(&s, &(topic.clone(), p), &part, at).await?;
                    if topic == OFFSETS_TOPIC {
                        complete_txn_offsets(&s, p, pid, kind);
                    }
                    Ok(())
                }
            }))
            .await
        })
        .await;
    for ((i, _), r) in results {
        out[i] = Some(r.unwrap_or_else(|_| {
            Err((codes::NOT_LEADER_OR_FOLLOWER, "a core is gone".to_string()))
        }));
    }
    for (i, r) in remote_results.await {
        out[i] = Some(r);
    }
    out
}

/// Sends a transaction call about `topic`/`p` to its owner on another node; `Err` carries
/// the Kafka code and why (a node that cannot be reached: COORDINATOR_NOT_AVAILABLE-like
/// retriable NOT_LEADER_OR_FOLLOWER, so the coordinator retries the marker).
pub(crate) async fn ask_owner(
    state: &CoreState,
    owner: meta::Assignment,
    topic: &str,
    p: u32,
    req: &NodeRequest,
) -> Result<(), (i16, String)> {
    match crate::node_rpc::call(state, owner.node_id, owner.core_index, req).await {
        Ok(NodeResponse::Code { code: NONE, .. }) => Ok(()),
        Ok(NodeResponse::Code { code, message }) => Err((code, format!("{topic}/{p}: {message}"))),
        Ok(NodeResponse::Failed { reason }) => Err((
            NOT_LEADER_OR_FOLLOWER,
            format!("{topic}/{p} on node {}: {reason}", owner.node_id),
        )),
        Ok(other) => Err((
            NOT_LEADER_OR_FOLLOWER,
            format!("{topic}/{p} on node {}: answered {other:?}", owner.node_id),
        )),
        Err(e) => Err((NOT_LEADER_OR_FOLLOWER, format!("{topic}/{p}: {e}"))),
    }
}

/// Answers another node's transaction call (`TxnBegin`, `TxnMarker`) for a partition this
/// node owns; a partition it does not own (moved meanwhile) is NOT_LEADER_OR_FOLLOWER.
pub(crate) async fn serve_node_request(state: &Rc<CoreState>, req: NodeRequest) -> NodeResponse {
    let code = |code: i16, message: String| NodeResponse::Code { code, message };
    match req {
        NodeRequest::TxnBegin {
            topic,
            partition,
            producer_id,
            epoch,
        } => {
            let Some(core) = state.owner_core(&topic, partition) else {
                return code(
                    state.not_owned_code(&topic, partition),
                    "not served here".into(),
                );
            };
            let begin = move |s: Rc<CoreState>| async move {
                begin_here(&s, &topic, partition, producer_id, epoch).await
            };
            match crate::route::on_core(state, core, begin).await {
                Ok(c) => code(c, String::new()),
                Err(gone) => code(NOT_LEADER_OR_FOLLOWER, gone.to_string()),
            }
        }
        NodeRequest::TxnMarker {
            topic,
            partition,
            producer_id,
            epoch,
            commit,
            coordinator_epoch,
        } => {
            if state.owner_core(&topic, partition).is_none() {
                return code(
                    state.not_owned_code(&topic, partition),
                    "not served here".into(),
                );
            }
            let kind = if commit {
                MarkerKind::Commit
            } else {
                MarkerKind::Abort
            };
            let parts = [(topic, partition)];
            let r =
                mark_partitions(state, producer_id, epoch, kind, coordinator_epoch, &parts).await;
            match r.into_iter().next().flatten() {
                Some(Ok(())) => code(NONE, String::new()),
                Some(Err((c, why))) => code(c, why),
                None => code(UNKNOWN_TOPIC_OR_PARTITION, "no such partition".into()),
            }
        }
        other => NodeResponse::Failed {
            reason: format!("not a transaction call: {other:?}"),
        },
    }
}

/// Opens producer `producer_id`'s transaction at `epoch` on `topic`/`p` of this core.
pub(crate) async fn begin_here(
    s: &CoreState,
    topic: &str,
    p: u32,
    producer_id: i64,
    epoch: i16,
) -> i16 {
    if let Err((code, _)) = crate::replica::check_leads(s, topic, p) {
        return code;
    }
    match crate::opening::partition(s, topic, p).await {
        None => codes::NOT_LEADER_OR_FOLLOWER,
        Some(part) => match part.begin_transaction(producer_id, epoch) {
            Ok(()) => NONE,
            Err(engine::PartitionError::FencedEpoch { .. }) => PRODUCER_FENCED,
            Err(e) => codes::for_partition_error(&e),
        },
    }
}

/// Writes `kind` markers for `meta`'s producer to every partition of its transaction. `Err`
/// names the partitions that could not be marked (the caller retries later: the decision is
/// already durable).
pub(crate) async fn write_markers(
    state: &Rc<CoreState>,
    meta: &TxnMeta,
    kind: MarkerKind,
) -> Result<(), String> {
    let partitions: Vec<(String, u32)> = meta.partitions.iter().cloned().collect();
    let results = mark_partitions(
        state,
        meta.producer_id,
        meta.epoch,
        kind,
        COORDINATOR_EPOCH,
        &partitions,
    )
    .await;
    let failed: Vec<String> = results
        .into_iter()
        .filter_map(|r| r.and_then(|r| r.err()).map(|(_, why)| why))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// A marker reached `__consumer_offsets` partition `partition`: the producer's pending
/// offsets in the groups of that partition are committed (or dropped, for an abort).
pub(crate) fn complete_txn_offsets(
    s: &CoreState,
    partition: u32,
    producer_id: i64,
    kind: MarkerKind,
) {
    for g in s.coordinators.groups.borrow_mut().values_mut() {
        if g.partition == partition {
            g.complete_txn(producer_id, kind == MarkerKind::Commit);
        }
    }
}

/// Finishes a prepared transaction: markers everywhere, then the completed state (partitions
/// cleared). The entry must be taken (`busy`). `Err` leaves it prepared, for `txn_tick`.
pub(crate) async fn finish(
    s: &Rc<CoreState>,
    id: &str,
    partition: u32,
    meta: TxnMeta,
) -> Result<(), i16> {
    let (kind, done) = match meta.status {
        TxnStatus::PrepareCommit => (MarkerKind::Commit, TxnStatus::CompleteCommit),
        TxnStatus::PrepareAbort => (MarkerKind::Abort, TxnStatus::CompleteAbort),
        other => unreachable!("finishing a transaction in state {other:?}"),
    };
    if let Err(e) = write_markers(s, &meta, kind).await {
        tracing::warn!(transactional_id = %id, error = %e, "writing transaction markers; retried by the coordinator tick");
        return Err(COORDINATOR_NOT_AVAILABLE);
    }
    let mut done_meta = meta;
    done_meta.status = done;
    done_meta.partitions.clear();
    done_meta.updated_ms = engine::clock::system_now_ms();
    // Not waited for: the markers are durable, and a lost completion is finished again.
    persist_with(s, id, partition, done_meta, Durability::Buffered).await
}

/// Aborts `meta`'s open transaction with a bumped epoch (fencing its producer): the abort is
/// durable, then the markers are written. Returns the state it left (complete, or prepared if
/// markers could not all be written). The entry must be taken.
pub(crate) async fn abort_open(
    s: &Rc<CoreState>,
    id: &str,
    partition: u32,
    mut meta: TxnMeta,
) -> Result<TxnMeta, i16> {
    assert_eq!(
        meta.status,
        TxnStatus::Ongoing,
        "only an open transaction is aborted"
    );
    if let Some(e) = next_epoch(meta.epoch) {
        meta.epoch = e;
    }
    meta.status = TxnStatus::PrepareAbort;
    meta.updated_ms = engine::clock::system_now_ms();
    persist(s, id, partition, meta.clone()).await?;
    finish(s, id, partition, meta).await?;
    current(s, id)
}

/// `id`'s state now. The entry is taken (`busy`), so nothing removed it meanwhile; an absent
/// one would be a bug, answered as a retriable error rather than a panic.
pub(crate) fn current(s: &CoreState, id: &str) -> Result<TxnMeta, i16> {
    let txns = s.coordinators.txns.borrow();
    let e = txns.get(id);
    debug_assert!(e.is_some_and(|e| e.busy), "a taken transactional id stays");
    e.map(|e| e.meta.clone()).ok_or(COORDINATOR_NOT_AVAILABLE)
}

pub(crate) async fn persist_txn_offsets(
    s: &CoreState,
    group_id: &str,
    partition: u32,
    pid: i64,
    epoch: i16,
    items: Vec<(String, i32, Committed)>,
) -> i16 {
    if let Err(code) = s.check_coordinates(OFFSETS_TOPIC, partition) {
        return code;
    }
    let Some(part) = crate::opening::partition(s, OFFSETS_TOPIC, partition).await else {
        return COORDINATOR_NOT_AVAILABLE;
    };
    // The group holds what the log will: refused before the write when past the bound.
    let held = s.coordinators.groups.borrow().get(group_id).map_or(0, |g| {
        g.pending_txn_offsets_after(pid, items.iter().map(|(t, p, _)| (t.as_str(), *p)))
    });
    if held > group::MAX_PENDING_TXN_OFFSETS_PER_PRODUCER {
        tracing::warn!(group = %group_id, producer_id = pid, limit = group::MAX_PENDING_TXN_OFFSETS_PER_PRODUCER, "transactional offset commit refused: too many partitions in one transaction (MAX_PENDING_TXN_OFFSETS_PER_PRODUCER)");
        return INVALID_REQUEST;
    }
    let batch = engine::batch_encode::encode_transactional(
        items
            .iter()
            .map(|(t, p, c)| engine::batch_encode::NewRecord {
                key: Some(group::encode_key(group_id, t, *p)),
                value: Some(group::encode_value(c)),
                headers: Default::default(),
                timestamp_ms: c.commit_ms,
            }),
        engine::batch_encode::ProducerSeq {
            producer_id: pid,
            epoch,
            base_sequence: -1,
        },
    );
    let rules = part.log().batch_rules();
    let valid = match engine::record_check::ValidBatch::new(&batch, rules) {
        Ok(v) => v,
        Err(e) => return codes::for_batch_error(&e),
    };
    let last_offset = match part.produce(valid, Durability::Sync).await {
        Ok(p) => p.last_offset,
        Err(engine::PartitionError::FencedEpoch { .. }) => return PRODUCER_FENCED,
        Err(e) => {
            tracing::debug!(group = %group_id, error = %e, "transactional offset commit refused");
            return codes::for_partition_error(&e);
        }
    };
    let key = (OFFSETS_TOPIC.to_string(), partition);
    if let Err(code) =
        crate::replica::replicate_coordinator_write(s, &key, &part, last_offset).await
    {
        return code;
    }
    let mut groups = s.coordinators.groups.borrow_mut();
    let g = groups.entry(group_id.to_string()).or_insert_with(|| {
        crate::group::GroupEntry::new(group_id, partition, s.initial_rebalance_delay())
    });
    for (t, p, c) in items {
        let held = g.add_pending_txn_offset(pid, t, p, c);
        debug_assert!(held, "the bound was checked before the write");
    }
    NONE
}

/// One coordinator round on this core: a transaction open past its timeout is aborted (its
/// producer fenced by the bumped epoch), a prepared one (a crash between the decision and its
/// markers, or a marker that could not be written) is finished, and an id idle past
/// `transactional-id-expiration-ms` with no transaction open is forgotten (a tombstone).
pub(crate) async fn txn_tick(state: &Rc<CoreState>) {
    let now = engine::clock::system_now_ms();
    let expiration_ms = state.ctx.config.transactional_id_expiration_ms as i64;
    // One pass over this core's ids: what expired, and what is due (timed out or prepared).
    let mut expired: Vec<(String, u32)> = Vec::new();
    let mut due: Vec<(String, u32)> = Vec::new();
    for (id, e) in state
        .coordinators
        .txns
        .borrow()
        .iter()
        .filter(|(_, e)| !e.busy)
    {
        let m = &e.meta;
        let idle = matches!(
            m.status,
            TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort
        );
        if idle && now > m.updated_ms.saturating_add(expiration_ms) {
            expired.push((id.clone(), e.partition));
        } else if m.status.is_prepared()
            || (m.status == TxnStatus::Ongoing
                && now > m.started_ms.saturating_add(m.timeout_ms as i64))
        {
            due.push((id.clone(), e.partition));
        }
    }
    for (id, partition) in expired {
        if take(state, &id).is_err() {
            continue;
        }
        match append_record(state, &id, partition, None, Durability::Sync).await {
            Ok(()) => {
                tracing::info!(transactional_id = %id, "transactional id expired (transactional-id-expiration-ms)");
                state.coordinators.txns.borrow_mut().remove(&id);
            }
            Err(code) => {
                tracing::debug!(transactional_id = %id, code, "expiring a transactional id");
                release(state, &id);
            }
        }
    }
    for (id, partition) in due {
        let Ok(meta) = take(state, &id) else {
            continue;
        };
        let r = if meta.status == TxnStatus::Ongoing {
            tracing::info!(transactional_id = %id, timeout_ms = meta.timeout_ms, "transaction timed out; aborting it");
            abort_open(state, &id, partition, meta).await.map(|_| ())
        } else {
            finish(state, &id, partition, meta).await
        };
        if let Err(code) = r {
            tracing::debug!(transactional_id = %id, code, "transaction not finished yet");
        }
        release(state, &id);
    }
}

/// The epoch after `epoch`, or `None` when it is exhausted (a new producer id is needed).
pub(crate) fn next_epoch(epoch: i16) -> Option<i16> {
    (epoch < i16::MAX - 1).then_some(epoch + 1)
}

/// Adds partitions to `id`'s transaction: recorded durably at the coordinator first (so its
/// markers will reach them), then each owner partition lets the producer write transactional
/// batches (`Partition::begin_transaction`). One code per partition, in order.
pub(crate) async fn add_to_txn(
    state: &Rc<CoreState>,
    id: &str,
    producer_id: i64,
    epoch: i16,
    partitions: Vec<(String, u32)>,
) -> Result<Vec<i16>, i16> {
    let id2 = id.to_string();
    let wanted = partitions.clone();
    on_txn_core(state, id, move |s, partition| async move {
        let id = id2;
        let mut meta = take(&s, &id)?;
        let result = async {
            check_producer(&meta, producer_id, epoch)?;
            if meta.status.is_prepared() {
                return Err(CONCURRENT_TRANSACTIONS);
            }
            let before = meta.partitions.len();
            meta.partitions.extend(wanted.iter().cloned());
            if meta.partitions.len() > MAX_PARTITIONS_PER_TRANSACTION {
                return Err(INVALID_REQUEST);
            }
            if meta.status != TxnStatus::Ongoing {
                meta.status = TxnStatus::Ongoing;
                meta.started_ms = engine::clock::system_now_ms();
            }
            if meta.partitions.len() != before || before == 0 {
                meta.updated_ms = engine::clock::system_now_ms();
                persist(&s, &id, partition, meta).await?;
            }
            Ok(())
        }
        .await;
        release(&s, &id);
        result
    })
    .await??;
    // The coordinator knows them: open the transaction on each partition.
    let mut scatter: Scatter<(String, u32)> = Scatter::default();
    let mut codes_out = vec![NONE; partitions.len()];
    let mut remote = Vec::new();
    for (i, (topic, p)) in partitions.iter().enumerate() {
        match (state.owner_core(topic, *p), state.remote_owner(topic, *p)) {
            (Some(core), _) => scatter.push(core, (i, 0), (topic.clone(), *p)),
            // Another node's partition: opened there with one node RPC; its marker goes
            // the same way (`mark_partitions`).
            (None, Some(owner)) => remote.push((i, owner, topic.clone(), *p)),
            (None, None) => codes_out[i] = UNKNOWN_TOPIC_OR_PARTITION,
        }
    }
    let remote_codes = join_all(remote.into_iter().map(|(i, owner, topic, p)| async move {
        let req = NodeRequest::TxnBegin {
            topic: topic.clone(),
            partition: p,
            producer_id,
            epoch,
        };
        let code = match ask_owner(state, owner, &topic, p, &req).await {
            Ok(()) => NONE,
            Err((code, why)) => {
                tracing::debug!(%why, code, "opening a transaction on another node");
                code
            }
        };
        (i, code)
    }));
    let results = scatter
        .gather(state, move |s, items: Vec<(String, u32)>| async move {
            let mut out = Vec::with_capacity(items.len());
            for (topic, p) in items {
                out.push(begin_here(&s, &topic, p, producer_id, epoch).await);
            }
            out
        })
        .await;
    for ((i, _), r) in results {
        codes_out[i] = r.unwrap_or(codes::NOT_LEADER_OR_FOLLOWER);
    }
    for (i, code) in remote_codes.await {
        codes_out[i] = code;
    }
    Ok(codes_out)
}

/// Checks a request's producer id and epoch against the coordinator's.
pub(crate) fn check_producer(meta: &TxnMeta, producer_id: i64, epoch: i16) -> Result<(), i16> {
    if producer_id != meta.producer_id {
        Err(INVALID_PRODUCER_ID_MAPPING)
    } else if epoch != meta.epoch {
        Err(PRODUCER_FENCED)
    } else {
        Ok(())
    }
}
