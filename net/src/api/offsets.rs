//! ListOffsets (earliest, latest, by timestamp) and InitProducerId. ListOffsets is answered by
//! the leader at the client's `current_leader_epoch` (fenced otherwise), with the leader epoch
//! of the offset it names.

use std::rc::Rc;

use engine::join::join_all;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse,
    ProducerId, TopicName,
};

use super::str_bytes;
use crate::codes;
use crate::core::CoreState;
use crate::route::Scatter;

const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
/// ListOffsets v7+ (KIP-734): the record with the largest timestamp.
const MAX_TIMESTAMP: i64 = -3;
/// ListOffsets v8+ (KIP-1005): the earliest offset on local disk (all of it: no tiered storage).
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// ListOffsets v9+ (KIP-1005): the latest tiered offset; without tiered storage, -1.
const LATEST_TIERED_TIMESTAMP: i64 = -5;

#[derive(Clone)]
struct Lookup {
    topic: String,
    partition: u32,
    timestamp: i64,
    read_committed: bool,
    /// The client's idea of the leader epoch (v4+, KIP-320; -1: none): fenced when stale.
    current_leader_epoch: i32,
}

fn answer(partition: i32, code: i16) -> ListOffsetsPartitionResponse {
    ListOffsetsPartitionResponse::default()
        .with_partition_index(partition)
        .with_error_code(code)
        .with_timestamp(-1)
        .with_offset(-1)
}

pub async fn list_offsets(
    state: &Rc<CoreState>,
    version: i16,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    let mut scatter: Scatter<Lookup> = Scatter::default();
    let read_committed = req.isolation_level == 1;
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let mut parts = Vec::new();
        for (p, lp) in topic.partitions.into_iter().enumerate() {
            match (lp.partition_index >= 0)
                .then(|| state.owner_core(&name, lp.partition_index as u32))
                .flatten()
            {
                None => parts.push(answer(
                    lp.partition_index,
                    super::not_owned(state, &name, lp.partition_index),
                )),
                Some(core) => {
                    parts.push(answer(lp.partition_index, codes::NONE));
                    scatter.push(
                        core,
                        (t, p),
                        Lookup {
                            topic: name.clone(),
                            partition: lp.partition_index as u32,
                            timestamp: lp.timestamp,
                            read_committed,
                            current_leader_epoch: lp.current_leader_epoch,
                        },
                    );
                }
            }
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(TopicName(str_bytes(name)))
                .with_partitions(parts),
        );
    }
    for ((t, p), r) in scatter.gather(state, lookup_local).await {
        let index = topics[t].partitions[p].partition_index;
        let mut r = r.unwrap_or_else(|_| answer(index, codes::NOT_LEADER_OR_FOLLOWER));
        if version < 4 {
            r.leader_epoch = -1;
        }
        topics[t].partitions[p] = r;
    }
    ListOffsetsResponse::default().with_topics(topics)
}

async fn lookup_local(
    state: Rc<CoreState>,
    items: Vec<Lookup>,
) -> Vec<ListOffsetsPartitionResponse> {
    let futs = items.into_iter().map(|item| {
        let state = state.clone();
        async move {
            let index = item.partition as i32;
            let serving = match crate::replica::check_leader_epoch(
                &state,
                &item.topic,
                item.partition,
                item.current_leader_epoch,
            ) {
                Ok(epoch) => epoch,
                Err(code) => return answer(index, code),
            };
            let Some(part) = crate::opening::partition(&state, &item.topic, item.partition).await
            else {
                return answer(index, codes::NOT_LEADER_OR_FOLLOWER);
            };
            let log = part.log();
            let r = match item.timestamp {
                // read_committed: the latest offset a read_committed consumer can reach.
                LATEST_TIMESTAMP if item.read_committed => {
                    answer(index, codes::NONE).with_offset(part.last_stable_offset() as i64)
                }
                LATEST_TIMESTAMP => {
                    answer(index, codes::NONE).with_offset(log.high_watermark() as i64)
                }
                EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => {
                    answer(index, codes::NONE).with_offset(log.log_start_offset() as i64)
                }
                LATEST_TIERED_TIMESTAMP => answer(index, codes::NONE),
                MAX_TIMESTAMP => match log.max_timestamp_ms() {
                    None => answer(index, codes::NONE),
                    Some(max) => match log.offset_for_timestamp(max).await {
                        Ok(Some(found)) => answer(index, codes::NONE)
                            .with_offset(found.offset as i64)
                            .with_timestamp(found.timestamp_ms),
                        Ok(None) => answer(index, codes::NONE),
                        Err(e) => answer(index, codes::for_log_error(&e)),
                    },
                },
                ts if ts >= 0 => match log.offset_for_timestamp(ts).await {
                    Ok(Some(found)) => answer(index, codes::NONE)
                        .with_offset(found.offset as i64)
                        .with_timestamp(found.timestamp_ms),
                    Ok(None) => answer(index, codes::NONE),
                    Err(e) => answer(index, codes::for_log_error(&e)),
                },
                _ => answer(index, codes::INVALID_REQUEST),
            };
            // The epoch the answered offset belongs to: the leader's own for the latest
            // offset, else the epoch its record was written in (as Kafka answers).
            let epoch = match (item.timestamp, r.offset) {
                (_, o) if o < 0 => -1,
                (LATEST_TIMESTAMP, _) => serving,
                (_, o) => part.leader_epoch_at(o as u64).unwrap_or(-1),
            };
            r.with_leader_epoch(epoch)
        }
    });
    join_all(futs).await
}

/// InitProducerId for idempotent producers: a fresh producer id, or the same id with the next
/// epoch when the producer asks for a bump (KIP-360). Transactions are not supported.
pub fn init_producer_id(
    state: &Rc<CoreState>,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    if req.transactional_id.is_some() {
        return InitProducerIdResponse::default()
            .with_error_code(codes::UNSUPPORTED_VERSION)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    let (id, epoch) =
        if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1 {
            (req.producer_id.0, req.producer_epoch + 1)
        } else {
            match state.ctx.allocate_producer_id() {
                Some(id) => (id, 0),
                None => {
                    return InitProducerIdResponse::default()
                        .with_error_code(codes::UNKNOWN_SERVER_ERROR)
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1)
                }
            }
        };
    InitProducerIdResponse::default()
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch)
}
