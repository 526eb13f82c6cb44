//! Produce: split the request by owner core, append on each owner (with idempotent-producer
//! checks), gather the answers in request order. acks=1 and acks=all answer only after the
//! fdatasync that covers the batch; acks=0 sends no response at all.

use std::rc::Rc;

use bytes::Bytes;
use engine::Durability;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};

use super::str_bytes;
use crate::codes;
use crate::core::CoreState;
use crate::route::Scatter;

/// One partition's part of a produce request, sent to its owner core.
#[derive(Clone)]
struct Item {
    topic: String,
    partition: i32,
    records: Option<Bytes>,
}

fn answer(partition: i32, error_code: i16, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(partition)
        .with_error_code(error_code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(str_bytes))
}

pub async fn handle(
    state: &Rc<CoreState>,
    version: i16,
    req: ProduceRequest,
) -> Option<ProduceResponse> {
    let acks = req.acks;
    let mut responses: Vec<TopicProduceResponse> = Vec::with_capacity(req.topic_data.len());
    let mut scatter: Scatter<Item> = Scatter::default();
    // Produce below v3 never gets here: the connection refuses what the codec cannot read.
    // A transactional batch is checked where it lands: its partition must be in the
    // producer's open transaction (`Partition::produce`, INVALID_TXN_STATE otherwise).
    let refuse_all = if !matches!(acks, -1..=1) {
        Some((
            codes::INVALID_REQUIRED_ACKS,
            format!("acks={acks}: use 0, 1 or -1 (all)"),
        ))
    } else {
        None
    };
    for (t, topic) in req.topic_data.into_iter().enumerate() {
        // v13 names topics by ID (KIP-516).
        let topic_id = topic.topic_id;
        let name = if version >= 13 {
            state.topic_name_by_id(topic_id)
        } else {
            Some(topic.name.0.to_string())
        };
        let known = name.is_some();
        let name = name.unwrap_or_default();
        let mut parts = Vec::with_capacity(topic.partition_data.len());
        for (p, data) in topic.partition_data.into_iter().enumerate() {
            let mut resp = answer(data.index, codes::NONE, None);
            if let Some((code, msg)) = &refuse_all {
                resp = answer(data.index, *code, Some(msg.clone()));
            } else if !known {
                resp = answer(
                    data.index,
                    codes::UNKNOWN_TOPIC_ID,
                    Some(format!("unknown topic id {topic_id}")),
                );
            } else if crate::core::is_internal_topic(&name) {
                resp = answer(
                    data.index,
                    codes::INVALID_TOPIC_EXCEPTION,
                    Some(format!("{name} is internal; clients cannot produce to it")),
                );
            } else if let Some(parent) = state
                .meta
                .borrow()
                .fanout_links
                .of_child(&name)
                .filter(|l| l.delay_ms > 0)
                .map(|l| l.parent.clone())
            {
                resp = answer(
                    data.index,
                    codes::POLICY_VIOLATION,
                    Some(format!("{name} is a delay child of {parent}: its records arrive only through fan-out")),
                );
            } else if data.index < 0 {
                resp = answer(data.index, codes::UNKNOWN_TOPIC_OR_PARTITION, None);
            } else {
                match state.owner_core(&name, data.index as u32) {
                    None => {
                        let code = state.not_owned_code(&name, data.index as u32);
                        let msg = if code == codes::NOT_LEADER_OR_FOLLOWER {
                            format!("{name}/{} is led by another node", data.index)
                        } else {
                            format!("unknown topic or partition {name}/{}", data.index)
                        };
                        resp = answer(data.index, code, Some(msg))
                    }
                    Some(core) => scatter.push(
                        core,
                        (t, p),
                        Item {
                            topic: name.clone(),
                            partition: data.index,
                            records: data.records,
                        },
                    ),
                }
            }
            parts.push(resp);
        }
        let mut r = TopicProduceResponse::default().with_partition_responses(parts);
        if version >= 13 {
            r.topic_id = topic_id;
        } else {
            r.name = TopicName(str_bytes(name));
        }
        responses.push(r);
    }
    let durability = if acks == 0 {
        Durability::Buffered
    } else {
        Durability::Sync
    };
    let acks_all = AcksAll {
        wanted: acks == -1,
        timeout_ms: req.timeout_ms.max(0) as u64,
        version,
    };
    let results = scatter
        .gather(state, move |s, items| {
            produce_local(s, items, durability, acks_all)
        })
        .await;
    for ((t, p), r) in results {
        let part = responses[t].partition_responses[p].index;
        responses[t].partition_responses[p] =
            r.unwrap_or_else(|e| answer(part, codes::NOT_LEADER_OR_FOLLOWER, Some(e.to_string())));
    }
    if acks == 0 {
        return None;
    }
    Some(ProduceResponse::default().with_responses(responses))
}

/// acks=all: whether the producer asked for it, and how long it waits for the in-sync
/// replicas (the request's `timeout_ms`); and the request's version (what the answer may carry).
#[derive(Clone, Copy)]
struct AcksAll {
    wanted: bool,
    timeout_ms: u64,
    version: i16,
}

/// Produce v8 added the per-record errors of a refused batch (KIP-467).
const FIRST_VERSION_WITH_RECORD_ERRORS: i16 = 8;

/// The answer to a batch refused for its record timestamps: INVALID_TIMESTAMP, and from v8
/// on the records that failed, each with the window it missed, as Kafka answers.
fn refused_timestamps(
    index: i32,
    topic: &str,
    bad: &engine::batch::BadTimestamps,
    version: i16,
) -> PartitionProduceResponse {
    let mut r = answer(
        index,
        codes::INVALID_TIMESTAMP,
        Some(format!("{topic}/{index}: {bad}")),
    );
    if version >= FIRST_VERSION_WITH_RECORD_ERRORS {
        r.record_errors = bad
            .records
            .iter()
            .map(|&(record, ts)| {
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(record)
                    .with_batch_index_error_message(Some(str_bytes(bad.record_message(ts, record))))
            })
            .collect();
    }
    r
}

/// Appends the items on this (their owner) core, concurrently; one answer per item.
async fn produce_local(
    state: Rc<CoreState>,
    items: Vec<Item>,
    durability: Durability,
    acks_all: AcksAll,
) -> Vec<PartitionProduceResponse> {
    let futs = items
        .into_iter()
        .map(|item| append_one(&state, item, durability, acks_all));
    engine::join::join_all(futs).await
}

#[tracing::instrument(
    target = "ringlog::trace",
    name = "produce_partition",
    level = "trace",
    skip_all,
    fields(topic = %item.topic, partition = item.partition, core = state.core)
)]
async fn append_one(
    state: &CoreState,
    item: Item,
    durability: Durability,
    acks_all: AcksAll,
) -> PartitionProduceResponse {
    let index = item.partition;
    let key = (item.topic.clone(), index as u32);
    if !state.leads(&key.0, key.1) {
        return answer(
            index,
            codes::NOT_LEADER_OR_FOLLOWER,
            Some(format!(
                "{}/{index}: this replica is not the leader (yet)",
                item.topic
            )),
        );
    }
    // A replicated partition's acks=all needs `min.insync.replicas` in sync (before the
    // append: nothing is written that could not be acknowledged).
    let replicated = state.meta.borrow().replica_set(&key.0, key.1).is_some();
    if replicated && acks_all.wanted {
        if let Some(refused) = crate::replica::check_min_insync(state, &key) {
            return answer(index, codes::NOT_ENOUGH_REPLICAS, Some(refused));
        }
    }
    let Some(part) = crate::opening::partition(state, &item.topic, index as u32).await else {
        return answer(
            index,
            codes::NOT_LEADER_OR_FOLLOWER,
            Some(format!(
                "{}/{index} is not open on core {}",
                item.topic, state.core
            )),
        );
    };
    let Some(records) = item.records else {
        return answer(index, codes::INVALID_RECORD, Some("null records".into()));
    };
    // Exactly one v2 batch per partition (Kafka refuses more from Produce v3 on); its record
    // timestamps within the topic's window (`message.timestamp.*.max.ms`).
    let rules = part.log().client_batch_rules();
    let valid = match engine::record_check::ValidBatch::new(&records, rules) {
        Ok(v) => v,
        Err(engine::batch::BatchError::InvalidTimestamp(bad)) => {
            return refused_timestamps(index, &item.topic, &bad, acks_all.version);
        }
        Err(e) => {
            let declared = engine::batch::declared_size(&records).unwrap_or(0);
            let code = if declared > 0 && (declared as usize) < records.len() {
                codes::INVALID_RECORD
            } else {
                codes::for_batch_error(&e)
            };
            return answer(index, code, Some(format!("{}/{index}: {e}", item.topic)));
        }
    };
    let count = valid.header().records_count.max(0) as u64;
    match part.produce(valid, durability).await {
        Ok(stored) => {
            if replicated {
                crate::replica::advance_high_watermark(state, &key);
                if acks_all.wanted {
                    if let Err((code, why)) = crate::replica::wait_replicated(
                        state,
                        &key,
                        &part,
                        stored.last_offset,
                        acks_all.timeout_ms,
                    )
                    .await
                    {
                        return answer(index, code, Some(why));
                    }
                }
            }
            if !stored.duplicate {
                let m = &state.metrics;
                crate::metrics::CoreMetrics::add(&m.records_in, count);
                crate::metrics::CoreMetrics::add(&m.record_bytes_in, records.len() as u64);
                part.traffic.produced(count, records.len() as u64);
            }
            answer(index, codes::NONE, None)
                .with_base_offset(stored.base_offset as i64)
                .with_log_append_time_ms(stored.log_append_time_ms.unwrap_or(-1))
                .with_log_start_offset(part.log().log_start_offset() as i64)
        }
        Err(e) => answer(index, codes::for_partition_error(&e), Some(e.to_string())),
    }
}
