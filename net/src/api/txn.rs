//! Transaction APIs (KIP-98): InitProducerId with a transactional id, AddPartitionsToTxn,
//! AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers, DescribeTransactions,
//! ListTransactions, DescribeProducers; and the
//! coordinator's own work: writing commit and abort markers to every partition of a
//! transaction (cross-core through `route`), aborting timed-out transactions and finishing
//! the ones a crash left prepared (`txn_tick`).
//!
//! Every transactional id lives on one core (the owner of its `__transaction_state`
//! partition); its state changes are appended there durably before they are answered, one at
//! a time (`TxnEntry::busy`).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::rc::Rc;

use engine::join::join_all;
use engine::txn::MarkerKind;
use engine::Durability;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse as DescribedProducersPartition, ProducerState as ProducerStateInfo,
    TopicResponse as DescribedProducersTopic,
};
use kafka_protocol::messages::describe_transactions_response::{
    TopicData as DescribedTopic, TransactionState as DescribedTxn,
};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedTxn;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeProducersRequest, DescribeProducersResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest,
    ListTransactionsResponse, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

use super::str_bytes;
use crate::codes::{
    self, CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT, INVALID_TXN_STATE, NONE, NOT_LEADER_OR_FOLLOWER,
    PRODUCER_FENCED, UNKNOWN_TOPIC_OR_PARTITION,
};
use crate::core::CoreState;
use crate::group::{self, Committed, OFFSETS_TOPIC};
use crate::node_rpc::{NodeRequest, NodeResponse};
use crate::route::Scatter;
use crate::txn::{
    TxnEntry, TxnMeta, TxnStatus, COORDINATOR_EPOCH, MAX_PARTITIONS_PER_TRANSACTION,
    MAX_TRANSACTIONAL_IDS_PER_CORE, MAX_TRANSACTIONAL_ID_BYTES, TXN_STATE_TOPIC,
};

/// Kafka's OPERATION_NOT_ATTEMPTED: the other partitions of an AddPartitionsToTxn that had a
/// bad one.
const OPERATION_NOT_ATTEMPTED: i16 = kafka_protocol::ResponseError::OperationNotAttempted.code();

/// Wall-clock ms: transaction start and update times (timeouts, expiry, DescribeTransactions).
fn now_ms() -> i64 {
    engine::clock::system_now_ms()
}

/// Runs `f` on the core coordinating `id`; `Err(code)` for a bad id or no coordinator.
async fn on_coordinator<R, F, Fut>(state: &Rc<CoreState>, id: &str, f: F) -> Result<R, i16>
where
    R: Send + 'static,
    F: FnOnce(Rc<CoreState>, u32) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
{
    if id.is_empty() || id.len() > MAX_TRANSACTIONAL_ID_BYTES {
        return Err(INVALID_REQUEST);
    }
    crate::route::on_coordinator_core(
        state,
        TXN_STATE_TOPIC,
        state.txn_coordinator(id),
        state.txn_partition(id),
        f,
    )
    .await
}

/// Appends `meta` as `id`'s newest record to its `__transaction_state` partition on this
/// core, durable before it returns, then makes it the entry's state.
async fn persist(s: &CoreState, id: &str, partition: u32, meta: TxnMeta) -> Result<(), i16> {
    persist_with(s, id, partition, meta, Durability::Sync).await
}

/// `persist` with the record's durability: `Buffered` only for a completed transaction, whose
/// loss in a crash leaves the durable prepared state, which is finished again (markers are
/// idempotent); a later durable record of the partition syncs it anyway.
async fn persist_with(
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
async fn append_record(
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
        timestamp_ms: now_ms(),
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
fn take(s: &CoreState, id: &str) -> Result<TxnMeta, i16> {
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

fn release(s: &CoreState, id: &str) {
    if let Some(e) = s.coordinators.txns.borrow_mut().get_mut(id) {
        e.busy = false;
    }
}

/// Checks a request's producer id and epoch against the coordinator's.
fn check_producer(meta: &TxnMeta, producer_id: i64, epoch: i16) -> Result<(), i16> {
    if producer_id != meta.producer_id {
        Err(INVALID_PRODUCER_ID_MAPPING)
    } else if epoch != meta.epoch {
        Err(PRODUCER_FENCED)
    } else {
        Ok(())
    }
}

/// The first InitProducerId version whose clients know PRODUCER_FENCED (KIP-588).
const INIT_PRODUCER_ID_FENCED_SINCE_VERSION: i16 = 4;
/// The first AddPartitionsToTxn, AddOffsetsToTxn and EndTxn version whose clients know
/// PRODUCER_FENCED (KIP-588).
const TXN_FENCED_SINCE_VERSION: i16 = 2;

/// `code` as a client of `version` knows it: before `fenced_since` a fenced producer is told
/// INVALID_PRODUCER_EPOCH, which such clients handle alike (what Kafka answers them).
fn fenced_as_known(code: i16, version: i16, fenced_since: i16) -> i16 {
    if code == PRODUCER_FENCED && version < fenced_since {
        codes::INVALID_PRODUCER_EPOCH
    } else {
        code
    }
}

/// The epoch after `epoch`, or `None` when it is exhausted (a new producer id is needed).
fn next_epoch(epoch: i16) -> Option<i16> {
    (epoch < i16::MAX - 1).then_some(epoch + 1)
}

/// Writes `kind` markers of producer `pid` at `epoch` to `partitions`, each on its owner core;
/// on a `__consumer_offsets` partition the producer's pending transactional offsets are then
/// committed or dropped. One result per partition, in order: `Err((code, why))` when it could
/// not be written (`None` when the partition does not exist: nothing left to mark).
async fn mark_partitions(
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
async fn ask_owner(
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
pub async fn serve_node_request(state: &Rc<CoreState>, req: NodeRequest) -> NodeResponse {
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
async fn begin_here(s: &CoreState, topic: &str, p: u32, producer_id: i64, epoch: i16) -> i16 {
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
async fn write_markers(
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

/// WriteTxnMarkers (the coordinator's request to partition leaders, KIP-98): each marker is
/// written to the partitions it names on their owner cores. ringlog's own coordinator writes
/// its markers directly (`write_markers`); this serves another coordinator or a tool.
pub async fn write_txn_markers(
    state: &Rc<CoreState>,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let mut out = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let kind = if m.transaction_result {
            MarkerKind::Commit
        } else {
            MarkerKind::Abort
        };
        let mut partitions: Vec<(String, u32)> = Vec::new();
        for t in &m.topics {
            for &p in &t.partition_indexes {
                if p >= 0 {
                    partitions.push((t.name.0.to_string(), p as u32));
                }
            }
        }
        let results = mark_partitions(
            state,
            m.producer_id.0,
            m.producer_epoch,
            kind,
            m.coordinator_epoch,
            &partitions,
        )
        .await;
        let mut by_pos = partitions.iter().zip(results);
        let topics = m
            .topics
            .iter()
            .map(|t| {
                let parts = t
                    .partition_indexes
                    .iter()
                    .map(|&p| {
                        let code = if p < 0 {
                            UNKNOWN_TOPIC_OR_PARTITION
                        } else {
                            match by_pos.next().map(|(_, r)| r) {
                                Some(Some(Ok(()))) => NONE,
                                Some(Some(Err((code, _)))) => code,
                                Some(None) | None => UNKNOWN_TOPIC_OR_PARTITION,
                            }
                        };
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(p)
                            .with_error_code(code)
                    })
                    .collect();
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(parts)
            })
            .collect();
        out.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(out)
}

/// A marker reached `__consumer_offsets` partition `partition`: the producer's pending
/// offsets in the groups of that partition are committed (or dropped, for an abort).
pub fn complete_txn_offsets(s: &CoreState, partition: u32, producer_id: i64, kind: MarkerKind) {
    for g in s.coordinators.groups.borrow_mut().values_mut() {
        if g.partition == partition {
            g.complete_txn(producer_id, kind == MarkerKind::Commit);
        }
    }
}

/// Finishes a prepared transaction: markers everywhere, then the completed state (partitions
/// cleared). The entry must be taken (`busy`). `Err` leaves it prepared, for `txn_tick`.
async fn finish(s: &Rc<CoreState>, id: &str, partition: u32, meta: TxnMeta) -> Result<(), i16> {
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
    done_meta.updated_ms = now_ms();
    // Not waited for: the markers are durable, and a lost completion is finished again.
    persist_with(s, id, partition, done_meta, Durability::Buffered).await
}

/// Aborts `meta`'s open transaction with a bumped epoch (fencing its producer): the abort is
/// durable, then the markers are written. Returns the state it left (complete, or prepared if
/// markers could not all be written). The entry must be taken.
async fn abort_open(
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
    meta.updated_ms = now_ms();
    persist(s, id, partition, meta.clone()).await?;
    finish(s, id, partition, meta).await?;
    current(s, id)
}

/// `id`'s state now. The entry is taken (`busy`), so nothing removed it meanwhile; an absent
/// one would be a bug, answered as a retriable error rather than a panic.
fn current(s: &CoreState, id: &str) -> Result<TxnMeta, i16> {
    let txns = s.coordinators.txns.borrow();
    let e = txns.get(id);
    debug_assert!(e.is_some_and(|e| e.busy), "a taken transactional id stays");
    e.map(|e| e.meta.clone()).ok_or(COORDINATOR_NOT_AVAILABLE)
}

/// InitProducerId with a transactional id: the id's producer id with the next epoch (a new
/// id at first use or when the epoch is exhausted), after aborting its open transaction or
/// finishing a prepared one, so the previous instance is fenced.
pub async fn init_producer_id(
    state: &Rc<CoreState>,
    version: i16,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refuse = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(fenced_as_known(
                code,
                version,
                INIT_PRODUCER_ID_FENCED_SINCE_VERSION,
            ))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let id = req
        .transactional_id
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    let timeout_ms = req.transaction_timeout_ms;
    if timeout_ms <= 0 || timeout_ms as u64 > state.ctx.config.transaction_max_timeout_ms {
        return refuse(INVALID_TRANSACTION_TIMEOUT);
    }
    let (req_pid, req_epoch) = (req.producer_id.0, req.producer_epoch);
    let id2 = id.clone();
    let r = on_coordinator(state, &id, move |s, partition| async move {
        let id = id2;
        let existing = {
            let mut txns = s.coordinators.txns.borrow_mut();
            if !txns.contains_key(&id) {
                if txns.len() >= MAX_TRANSACTIONAL_IDS_PER_CORE {
                    tracing::warn!(transactional_id = %id, limit = MAX_TRANSACTIONAL_IDS_PER_CORE, "transactional id refused: this core coordinates the most it may (MAX_TRANSACTIONAL_IDS_PER_CORE)");
                    return Err(COORDINATOR_NOT_AVAILABLE);
                }
                let pid = s.ctx.allocate_producer_id().ok_or(codes::UNKNOWN_SERVER_ERROR)?;
                txns.insert(
                    id.clone(),
                    TxnEntry {
                        meta: TxnMeta {
                            producer_id: pid,
                            // The first InitProducerId bumps this to 0.
                            epoch: -1,
                            timeout_ms,
                            status: TxnStatus::Empty,
                            partitions: BTreeSet::new(),
                            started_ms: 0,
                            updated_ms: now_ms(),
                        },
                        partition,
                        busy: false,
                    },
                );
                false
            } else {
                true
            }
        };
        let mut meta = take(&s, &id)?;
        let result = async {
            // KIP-360: a producer that names its id and epoch asks to bump its own epoch; a
            // stale one is fenced.
            if existing && req_pid >= 0 {
                check_producer(&meta, req_pid, req_epoch)?;
            }
            if meta.status == TxnStatus::Ongoing {
                meta = abort_open(&s, &id, partition, meta).await?;
            } else if meta.status.is_prepared() {
                finish(&s, &id, partition, meta).await?;
                meta = current(&s, &id)?;
            }
            match next_epoch(meta.epoch) {
                Some(e) => meta.epoch = e,
                None => {
                    meta.producer_id =
                        s.ctx.allocate_producer_id().ok_or(codes::UNKNOWN_SERVER_ERROR)?;
                    meta.epoch = 0;
                }
            }
            meta.timeout_ms = timeout_ms;
            meta.status = TxnStatus::Empty;
            meta.partitions.clear();
            meta.updated_ms = now_ms();
            persist(&s, &id, partition, meta.clone()).await?;
            Ok((meta.producer_id, meta.epoch))
        }
        .await;
        release(&s, &id);
        result
    })
    .await;
    match r.and_then(|r| r) {
        Ok((pid, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch),
        Err(code) => refuse(code),
    }
}

/// Adds partitions to `id`'s transaction: recorded durably at the coordinator first (so its
/// markers will reach them), then each owner partition lets the producer write transactional
/// batches (`Partition::begin_transaction`). One code per partition, in order.
async fn add_to_txn(
    state: &Rc<CoreState>,
    id: &str,
    producer_id: i64,
    epoch: i16,
    partitions: Vec<(String, u32)>,
) -> Result<Vec<i16>, i16> {
    let id2 = id.to_string();
    let wanted = partitions.clone();
    on_coordinator(state, id, move |s, partition| async move {
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
                meta.started_ms = now_ms();
            }
            if meta.partitions.len() != before || before == 0 {
                meta.updated_ms = now_ms();
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

/// AddPartitionsToTxn v0–v3 (what clients send; v4+ is the brokers' verification form).
pub async fn add_partitions_to_txn(
    state: &Rc<CoreState>,
    version: i16,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let id = req.v3_and_below_transactional_id.0.to_string();
    let (pid, epoch) = (
        req.v3_and_below_producer_id.0,
        req.v3_and_below_producer_epoch,
    );
    // Unknown partitions fail the request before anything is added (Kafka's rule).
    let mut wanted: Vec<(String, u32)> = Vec::new();
    let mut bad = false;
    let known = |topic: &str, p: i32| {
        p >= 0
            && state
                .meta
                .borrow()
                .topic(topic)
                .is_some_and(|t| (p as u32) < t.partitions)
    };
    for t in &req.v3_and_below_topics {
        for &p in &t.partitions {
            if known(&t.name.0, p) {
                wanted.push((t.name.0.to_string(), p as u32));
            } else {
                bad = true;
            }
        }
    }
    let outcome: Result<BTreeMap<(String, u32), i16>, i16> = if bad {
        Err(OPERATION_NOT_ATTEMPTED)
    } else {
        match add_to_txn(state, &id, pid, epoch, wanted.clone()).await {
            Ok(codes) => Ok(wanted.into_iter().zip(codes).collect()),
            Err(code) => Err(code),
        }
    };
    let topics = req
        .v3_and_below_topics
        .iter()
        .map(|t| {
            let results = t
                .partitions
                .iter()
                .map(|&p| {
                    let code = match &outcome {
                        _ if !known(&t.name.0, p) => UNKNOWN_TOPIC_OR_PARTITION,
                        Ok(m) => m
                            .get(&(t.name.0.to_string(), p as u32))
                            .copied()
                            .unwrap_or(NONE),
                        Err(c) => *c,
                    };
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(fenced_as_known(
                            code,
                            version,
                            TXN_FENCED_SINCE_VERSION,
                        ))
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(results)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics)
}

/// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction, so its
/// TxnOffsetCommit records are marked with the rest.
pub async fn add_offsets_to_txn(
    state: &Rc<CoreState>,
    version: i16,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let group_id = req.group_id.0.to_string();
    // The group's `__consumer_offsets` partition joins the transaction wherever it is (its
    // marker goes to its node like any partition's).
    let code = match state.group_partition(&group_id) {
        None => COORDINATOR_NOT_AVAILABLE,
        Some(p) => {
            let id = req.transactional_id.0.to_string();
            match add_to_txn(
                state,
                &id,
                req.producer_id.0,
                req.producer_epoch,
                vec![(OFFSETS_TOPIC.to_string(), p)],
            )
            .await
            {
                Ok(codes) => codes.first().copied().unwrap_or(NONE),
                Err(code) => code,
            }
        }
    };
    AddOffsetsToTxnResponse::default().with_error_code(fenced_as_known(
        code,
        version,
        TXN_FENCED_SINCE_VERSION,
    ))
}

/// EndTxn: the decision (PrepareCommit or PrepareAbort) is made durable, then the markers are
/// written to every partition of the transaction, then the completed state. The answer comes
/// once the decision is durable and the markers are written; if some marker could not be
/// written the answer is still success (the decision stands) and the coordinator's tick
/// finishes it, while the producer's next transactional request gets CONCURRENT_TRANSACTIONS.
pub async fn end_txn(state: &Rc<CoreState>, version: i16, req: EndTxnRequest) -> EndTxnResponse {
    let id = req.transactional_id.0.to_string();
    let (pid, epoch, commit) = (req.producer_id.0, req.producer_epoch, req.committed);
    let id2 = id.clone();
    let r = on_coordinator(state, &id, move |s, partition| async move {
        let id = id2;
        let mut meta = take(&s, &id)?;
        let result = async {
            check_producer(&meta, pid, epoch)?;
            match (meta.status, commit) {
                (TxnStatus::Ongoing, _) => {}
                // A retry of what already happened.
                (TxnStatus::CompleteCommit, true) | (TxnStatus::CompleteAbort, false) => {
                    return Ok(())
                }
                (TxnStatus::PrepareCommit, true) | (TxnStatus::PrepareAbort, false) => {
                    return Err(CONCURRENT_TRANSACTIONS)
                }
                _ => return Err(INVALID_TXN_STATE),
            }
            meta.status = if commit {
                TxnStatus::PrepareCommit
            } else {
                TxnStatus::PrepareAbort
            };
            meta.updated_ms = now_ms();
            persist(&s, &id, partition, meta.clone()).await?;
            // The decision is durable: from here the transaction completes, now or later.
            let _ = finish(&s, &id, partition, meta).await;
            Ok(())
        }
        .await;
        release(&s, &id);
        result
    })
    .await;
    let code = match r.and_then(|r| r) {
        Ok(()) => NONE,
        Err(c) => c,
    };
    EndTxnResponse::default()
        .with_error_code(fenced_as_known(code, version, TXN_FENCED_SINCE_VERSION))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
}

/// TxnOffsetCommit: the offsets are appended to the group's `__consumer_offsets` partition as
/// a transactional batch of the producer (refused there unless AddOffsetsToTxn opened the
/// transaction on it) and held pending in the group until the marker commits or drops them.
pub async fn txn_offset_commit(
    state: &Rc<CoreState>,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let group_id = req.group_id.0.to_string();
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    let mut items: Vec<(String, i32, Committed)> = Vec::new();
    let mut early: BTreeMap<(String, i32), i16> = BTreeMap::new();
    let now = now_ms();
    for t in &req.topics {
        for p in &t.partitions {
            let key = (t.name.0.to_string(), p.partition_index);
            let meta_len = p.committed_metadata.as_ref().map_or(0, |m| m.len());
            if meta_len > group::MAX_OFFSET_METADATA_BYTES {
                early.insert(key, codes::OFFSET_METADATA_TOO_LARGE);
                continue;
            }
            items.push((
                key.0,
                key.1,
                Committed {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    commit_ms: now,
                },
            ));
        }
    }
    let code = match state.group_coordinator(&group_id) {
        None => state.not_coordinator_code(OFFSETS_TOPIC, state.group_partition(&group_id)),
        Some((partition, core)) if !items.is_empty() => {
            let g = group_id.clone();
            let items2 = items.clone();
            crate::route::on_core(state, core, move |s| async move {
                persist_txn_offsets(&s, &g, partition, pid, epoch, items2).await
            })
            .await
            .unwrap_or(COORDINATOR_NOT_AVAILABLE)
        }
        Some(_) => NONE,
    };
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let c = early
                        .get(&(t.name.0.to_string(), p.partition_index))
                        .copied()
                        .unwrap_or(code);
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(c)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

async fn persist_txn_offsets(
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
pub async fn txn_tick(state: &Rc<CoreState>) {
    let now = now_ms();
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

/// DescribeTransactions: each id's state from its coordinator.
pub async fn describe_transactions(
    state: &Rc<CoreState>,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut out = Vec::with_capacity(req.transactional_ids.len());
    for tid in req.transactional_ids {
        let id = tid.0.to_string();
        let id2 = id.clone();
        let r = on_coordinator(state, &id, move |s, _| async move {
            s.coordinators
                .txns
                .borrow()
                .get(&id2)
                .map(|e| e.meta.clone())
        })
        .await;
        let d = DescribedTxn::default().with_transactional_id(tid.clone());
        out.push(match r {
            Err(code) => d.with_error_code(code),
            Ok(None) => d.with_error_code(codes::TRANSACTIONAL_ID_NOT_FOUND),
            Ok(Some(m)) => {
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (t, p) in &m.partitions {
                    by_topic.entry(t.clone()).or_default().push(*p as i32);
                }
                d.with_transaction_state(str_bytes(m.status.name().to_string()))
                    .with_transaction_timeout_ms(m.timeout_ms)
                    .with_transaction_start_time_ms(if m.status == TxnStatus::Ongoing {
                        m.started_ms
                    } else {
                        -1
                    })
                    .with_producer_id(ProducerId(m.producer_id))
                    .with_producer_epoch(m.epoch)
                    .with_topics(
                        by_topic
                            .into_iter()
                            .map(|(t, ps)| {
                                DescribedTopic::default()
                                    .with_topic(TopicName(str_bytes(t)))
                                    .with_partitions(ps)
                            })
                            .collect(),
                    )
            }
        });
    }
    DescribeTransactionsResponse::default().with_transaction_states(out)
}

/// ListTransactions: every core's transactional ids, filtered by state, producer id,
/// duration and (v2, KIP-1152) a regex the whole id must match.
pub async fn list_transactions(
    state: &Rc<CoreState>,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let pattern = match req
        .transactional_id_pattern
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        None => None,
        Some(p) => {
            match crate::group::consumer::SubscriptionRegex::compile("transactional id pattern", p)
            {
                Ok(re) => Some(re),
                Err((code, _)) => return ListTransactionsResponse::default().with_error_code(code),
            }
        }
    };
    let states: BTreeSet<String> = req.state_filters.iter().map(|s| s.to_string()).collect();
    let pids: BTreeSet<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let min_duration_ms = req.duration_filter;
    let cores = state.ctx.config.cores();
    let mut scatter: Scatter<()> = Scatter::default();
    for c in 0..cores {
        scatter.push(c, (c, 0), ());
    }
    let now = now_ms();
    let results = scatter
        .gather(state, move |s, items: Vec<()>| {
            let states = states.clone();
            let pids = pids.clone();
            let pattern = pattern.clone();
            async move {
                let listed: Vec<(String, i64, &'static str)> = s
                    .coordinators
                    .txns
                    .borrow()
                    .iter()
                    .filter(|(_, e)| states.is_empty() || states.contains(e.meta.status.name()))
                    .filter(|(_, e)| pids.is_empty() || pids.contains(&e.meta.producer_id))
                    .filter(|(id, _)| pattern.as_ref().is_none_or(|re| re.matches(id)))
                    .filter(|(_, e)| {
                        min_duration_ms < 0
                            || (e.meta.status == TxnStatus::Ongoing
                                && now - e.meta.started_ms >= min_duration_ms)
                    })
                    .map(|(id, e)| (id.clone(), e.meta.producer_id, e.meta.status.name()))
                    .collect();
                items.iter().map(|_| listed.clone()).collect::<Vec<_>>()
            }
        })
        .await;
    let mut out = Vec::new();
    for (_, r) in results {
        for (id, pid, st) in r.unwrap_or_default() {
            out.push(
                ListedTxn::default()
                    .with_transactional_id(TransactionalId(str_bytes(id)))
                    .with_producer_id(ProducerId(pid))
                    .with_transaction_state(str_bytes(st.to_string())),
            );
        }
    }
    ListTransactionsResponse::default().with_transaction_states(out)
}

/// DescribeProducers (KIP-664, what `kafka-transactions describe-producers` and
/// `find-hanging` read): each partition's remembered producers, from its owner core, with the
/// first offset of each one's open transaction there.
pub async fn describe_producers(
    state: &Rc<CoreState>,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut topics: Vec<DescribedProducersTopic> = Vec::with_capacity(req.topics.len());
    let mut scatter: Scatter<(String, u32)> = Scatter::default();
    for (t, topic) in req.topics.iter().enumerate() {
        let name = topic.name.0.to_string();
        let mut parts = Vec::with_capacity(topic.partition_indexes.len());
        for (i, &p) in topic.partition_indexes.iter().enumerate() {
            let answer = DescribedProducersPartition::default().with_partition_index(p);
            match (p >= 0)
                .then(|| state.owner_core(&name, p as u32))
                .flatten()
            {
                None => {
                    let code = super::not_owned(state, &name, p);
                    let msg = if code == UNKNOWN_TOPIC_OR_PARTITION {
                        format!("unknown topic or partition {name}/{p}")
                    } else {
                        format!("{name}/{p} is led by another node")
                    };
                    parts.push(
                        answer
                            .with_error_code(code)
                            .with_error_message(Some(str_bytes(msg))),
                    )
                }
                Some(core) => {
                    parts.push(answer);
                    scatter.push(core, (t, i), (name.clone(), p as u32));
                }
            }
        }
        topics.push(
            DescribedProducersTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(parts),
        );
    }
    let results = scatter
        .gather(state, |s, items: Vec<(String, u32)>| async move {
            let mut out = Vec::with_capacity(items.len());
            for (topic, p) in items {
                out.push(crate::opening::partition(&s, &topic, p).await.map(|part| {
                    part.producers()
                        .into_iter()
                        .map(|(st, open_from)| {
                            ProducerStateInfo::default()
                                .with_producer_id(ProducerId(st.producer_id))
                                .with_producer_epoch(st.epoch as i32)
                                .with_last_sequence(st.last_sequence)
                                .with_last_timestamp(st.last_timestamp_ms)
                                .with_coordinator_epoch(if open_from.is_some() {
                                    COORDINATOR_EPOCH
                                } else {
                                    -1
                                })
                                .with_current_txn_start_offset(open_from.map_or(-1, |o| o as i64))
                        })
                        .collect::<Vec<_>>()
                }));
            }
            out
        })
        .await;
    for ((t, i), r) in results {
        let slot = &mut topics[t].partitions[i];
        match r {
            Ok(Some(producers)) => slot.active_producers = producers,
            Ok(None) | Err(_) => slot.error_code = codes::NOT_LEADER_OR_FOLLOWER,
        }
    }
    DescribeProducersResponse::default().with_topics(topics)
}
