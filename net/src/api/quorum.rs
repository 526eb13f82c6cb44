//! DescribeQuorum (KIP-595/KIP-836, what `kafka-metadata-quorum describe` and
//! `Admin.describeMetadataQuorum` read), answered from the openraft metastore: Kafka's
//! `__cluster_metadata` partition 0 stands for the metastore's raft log. Leader = the raft
//! leader's node id, epoch = its term, high watermark = the applied index; each voter and
//! learner (observer) with its log end where this node knows it (its own; -1 for the others,
//! whose replication progress only the leader's openraft metrics hold).

use std::rc::Rc;

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};

use super::str_bytes;
use crate::codes;
use crate::core::CoreState;

/// The name Kafka gives its metadata log; DescribeQuorum names it.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

pub async fn describe_quorum(
    state: &Rc<CoreState>,
    version: i16,
    req: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    let status = match state.ctx.meta.status().await {
        Ok(s) => s,
        Err(e) => {
            return DescribeQuorumResponse::default()
                .with_error_code(codes::for_meta_error(&e))
                .with_error_message(Some(str_bytes(format!("metastore status: {e}"))))
        }
    };
    let me = status.node_id;
    let replica = |id: u64| {
        let log_end = if id == me {
            status.last_log_index.map_or(-1, |i| i as i64)
        } else {
            -1
        };
        ReplicaState::default()
            .with_replica_id(BrokerId(id as i32))
            .with_log_end_offset(log_end)
            .with_last_fetch_timestamp(-1)
            .with_last_caught_up_timestamp(-1)
    };
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let d = PartitionData::default().with_partition_index(p.partition_index);
                    if t.topic_name.0.as_str() != METADATA_TOPIC || p.partition_index != 0 {
                        return d
                            .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                            .with_error_message(Some(str_bytes(format!(
                                "the metadata quorum is {METADATA_TOPIC} partition 0"
                            ))));
                    }
                    d.with_leader_id(BrokerId(status.current_leader.map_or(-1, |l| l as i32)))
                        .with_leader_epoch(status.current_term as i32)
                        .with_high_watermark(status.last_applied_index.map_or(-1, |i| i as i64))
                        .with_current_voters(status.voters.iter().map(|&v| replica(v)).collect())
                        .with_observers(status.learners.iter().map(|&v| replica(v)).collect())
                })
                .collect();
            TopicData::default()
                .with_topic_name(TopicName(t.topic_name.0.clone()))
                .with_partitions(partitions)
        })
        .collect();
    let mut resp = DescribeQuorumResponse::default().with_topics(topics);
    if version >= 2 {
        // This node's Kafka endpoint stands for the voters here (one node); other voters'
        // Kafka endpoints are not in the metastore's status.
        let e = state.ctx.brokers.endpoint_of_core(0);
        resp.nodes = status
            .voters
            .iter()
            .filter(|&&v| v == me)
            .map(|&v| {
                Node::default()
                    .with_node_id(BrokerId(v as i32))
                    .with_listeners(vec![Listener::default()
                        .with_name(str_bytes("PLAINTEXT"))
                        .with_host(str_bytes(e.host.clone()))
                        .with_port(e.port)])
            })
            .collect();
    }
    resp
}
