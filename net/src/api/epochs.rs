//! OffsetForLeaderEpoch (API 23) for clients (KIP-320): where a leader epoch ends on the
//! partition's leader, so a consumer whose position came from an older leader can tell
//! whether the log it read was truncated since (its position past that end). Answered on the
//! owner core by the leader only, after its `current_leader_epoch` check
//! (`replica::check_leader_epoch`). An epoch older than every epoch the leader still knows
//! answers -1/-1 (Kafka's UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET). A partition not
//! replicated is epoch 0 throughout.
//!
//! Followers do not use this API: they ask their leader over the node RPC (`LeaderEpochEnd`,
//! `crate::replica`), which answers from the same `Partition::leader_epoch_end`.

use std::rc::Rc;

use engine::join::join_all;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use crate::codes;
use crate::core::CoreState;
use crate::route::Scatter;

/// Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
const UNDEFINED: i64 = -1;

#[derive(Clone)]
struct EpochQuery {
    topic: String,
    partition: u32,
    current_leader_epoch: i32,
    leader_epoch: i32,
}

fn answer(partition: i32, code: i16) -> EpochEndOffset {
    EpochEndOffset::default()
        .with_partition(partition)
        .with_error_code(code)
        .with_leader_epoch(UNDEFINED as i32)
        .with_end_offset(UNDEFINED)
}

pub async fn offset_for_leader_epoch(
    state: &Rc<CoreState>,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    let mut scatter: Scatter<EpochQuery> = Scatter::default();
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.topic.0.to_string();
        let mut parts = Vec::with_capacity(topic.partitions.len());
        for (p, q) in topic.partitions.into_iter().enumerate() {
            let owner = (q.partition >= 0)
                .then(|| state.owner_core(&name, q.partition as u32))
                .flatten();
            match owner {
                None => parts.push(answer(
                    q.partition,
                    super::not_owned(state, &name, q.partition),
                )),
                Some(core) => {
                    parts.push(answer(q.partition, codes::NONE));
                    scatter.push(
                        core,
                        (t, p),
                        EpochQuery {
                            topic: name.clone(),
                            partition: q.partition as u32,
                            current_leader_epoch: q.current_leader_epoch,
                            leader_epoch: q.leader_epoch,
                        },
                    );
                }
            }
        }
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(parts),
        );
    }
    for ((t, p), r) in scatter.gather(state, epoch_ends_local).await {
        let index = topics[t].partitions[p].partition;
        topics[t].partitions[p] =
            r.unwrap_or_else(|_| answer(index, codes::NOT_LEADER_OR_FOLLOWER));
    }
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

async fn epoch_ends_local(state: Rc<CoreState>, items: Vec<EpochQuery>) -> Vec<EpochEndOffset> {
    let futs = items.into_iter().map(|q| {
        let state = state.clone();
        async move {
            let index = q.partition as i32;
            if let Err(code) = crate::replica::check_leader_epoch(
                &state,
                &q.topic,
                q.partition,
                q.current_leader_epoch,
            ) {
                return answer(index, code);
            }
            let Some(part) = crate::opening::partition(&state, &q.topic, q.partition).await else {
                return answer(index, codes::NOT_LEADER_OR_FOLLOWER);
            };
            match part.leader_epoch_end(q.leader_epoch) {
                Some((epoch, end)) => answer(index, codes::NONE)
                    .with_leader_epoch(epoch)
                    .with_end_offset(end as i64),
                None => answer(index, codes::NONE),
            }
        }
    });
    join_all(futs).await
}
