//! DeleteRecords (API 21): moves each partition's log start offset on its owner core
//! (`Partition::delete_records`, durable before the answer) and answers the new low watermark.
//! Offset -1 means the high watermark; past it is OFFSET_OUT_OF_RANGE; at or below the current
//! log start nothing changes. Internal topics are refused (POLICY_VIOLATION), as Kafka does.

use std::rc::Rc;

use engine::join::join_all;
use engine::log::DeleteBefore;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::codes;
use crate::core::{is_internal_topic, CoreState};
use crate::route::Scatter;

/// Kafka's "delete up to the high watermark".
const TO_HIGH_WATERMARK: i64 = -1;

#[derive(Clone)]
struct Deletion {
    topic: String,
    partition: u32,
    before: DeleteBefore,
}

fn answer(partition: i32, code: i16, low_watermark: i64) -> DeleteRecordsPartitionResult {
    DeleteRecordsPartitionResult::default()
        .with_partition_index(partition)
        .with_error_code(code)
        .with_low_watermark(low_watermark)
}

pub async fn delete_records(
    state: &Rc<CoreState>,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    let mut scatter: Scatter<Deletion> = Scatter::default();
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let internal = is_internal_topic(&name);
        let mut parts = Vec::with_capacity(topic.partitions.len());
        for (p, dp) in topic.partitions.into_iter().enumerate() {
            let index = dp.partition_index;
            let owner = (index >= 0)
                .then(|| state.owner_core(&name, index as u32))
                .flatten();
            let before = match dp.offset {
                TO_HIGH_WATERMARK => Some(DeleteBefore::HighWatermark),
                o if o >= 0 => Some(DeleteBefore::Offset(o as u64)),
                _ => None,
            };
            match (owner, before) {
                (None, _) => parts.push(answer(index, super::not_owned(state, &name, index), -1)),
                (Some(_), _) if internal => parts.push(answer(index, codes::POLICY_VIOLATION, -1)),
                (Some(_), None) => parts.push(answer(index, codes::OFFSET_OUT_OF_RANGE, -1)),
                (Some(core), Some(before)) => {
                    parts.push(answer(index, codes::NONE, -1));
                    scatter.push(
                        core,
                        (t, p),
                        Deletion {
                            topic: name.clone(),
                            partition: index as u32,
                            before,
                        },
                    );
                }
            }
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(parts),
        );
    }
    for ((t, p), r) in scatter.gather(state, delete_local).await {
        let index = topics[t].partitions[p].partition_index;
        topics[t].partitions[p] =
            r.unwrap_or_else(|_| answer(index, codes::NOT_LEADER_OR_FOLLOWER, -1));
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

async fn delete_local(
    state: Rc<CoreState>,
    items: Vec<Deletion>,
) -> Vec<DeleteRecordsPartitionResult> {
    let futs = items.into_iter().map(|item| {
        let state = state.clone();
        async move {
            let index = item.partition as i32;
            let Some(part) = crate::opening::partition(&state, &item.topic, item.partition).await else {
                return answer(index, codes::NOT_LEADER_OR_FOLLOWER, -1);
            };
            match part.delete_records(item.before).await {
                Ok(start) => answer(index, codes::NONE, start as i64),
                Err(e) => {
                    let code = codes::for_partition_error(&e);
                    if code == codes::KAFKA_STORAGE_ERROR {
                        tracing::warn!(topic = %item.topic, partition = item.partition, error = %e, "delete records failed");
                    }
                    answer(index, code, -1)
                }
            }
        }
    });
    join_all(futs).await
}
