//! Transaction APIs (KIP-98): InitProducerId with a transactional id, AddPartitionsToTxn,
//! AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers, DescribeTransactions,
//! ListTransactions, DescribeProducers. The coordinator's own work (appending an id's state,
//! writing commit and abort markers, the tick that aborts timed-out transactions and finishes
//! the ones a crash left prepared) is `crate::coordinators::txn`.
//!
//! Every transactional id lives on one core (the owner of its `__transaction_state`
//! partition); its state changes are appended there durably before they are answered, one at
//! a time (`TxnEntry::busy`).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use engine::txn::MarkerKind;
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
    self, CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE, NONE, PRODUCER_FENCED, UNKNOWN_TOPIC_OR_PARTITION,
};
use crate::coordinators::txn::{
    abort_open, add_to_txn, check_producer, current, finish, mark_partitions, next_epoch,
    on_txn_core, persist, persist_txn_offsets, release, take,
};
use crate::core::CoreState;
use crate::group::{self, Committed, OFFSETS_TOPIC};
use crate::route::Scatter;
use crate::txn::{TxnEntry, TxnMeta, TxnStatus, COORDINATOR_EPOCH, MAX_TRANSACTIONAL_IDS_PER_CORE};

/// Kafka's OPERATION_NOT_ATTEMPTED: the other partitions of an AddPartitionsToTxn that had a
/// bad one.
const OPERATION_NOT_ATTEMPTED: i16 = kafka_protocol::ResponseError::OperationNotAttempted.code();

/// Wall-clock ms: transaction start and update times (timeouts, expiry, DescribeTransactions).
fn now_ms() -> i64 {
    engine::clock::system_now_ms()
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
    let r = on_txn_core(state, &id, move |s, partition| async move {
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
    let r = on_txn_core(state, &id, move |s, partition| async move {
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

/// DescribeTransactions: each id's state from its coordinator.
pub async fn describe_transactions(
    state: &Rc<CoreState>,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut out = Vec::with_capacity(req.transactional_ids.len());
    for tid in req.transactional_ids {
        let id = tid.0.to_string();
        let id2 = id.clone();
        let r = on_txn_core(state, &id, move |s, _| async move {
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
