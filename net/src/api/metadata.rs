//! Metadata: this node as the only broker and the leader of every partition, topics with their
//! stable topic UUIDs.

use std::rc::Rc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use uuid::Uuid;

use super::str_bytes;
use crate::codes;
use crate::core::CoreState;

pub async fn handle(state: &Rc<CoreState>, version: i16, req: MetadataRequest) -> MetadataResponse {
    let node = state.node_id() as i32;
    let (host, port) = state.ctx.config.advertised();
    // Which topics: null (or an empty list before v1) means all.
    let wanted: Option<Vec<(Option<String>, Uuid)>> = match req.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(
            t.into_iter()
                .map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id))
                .collect(),
        ),
    };
    if let Some(w) = &wanted {
        let missing: Vec<String> = {
            let m = state.meta.borrow();
            w.iter()
                .filter_map(|(n, _)| n.clone())
                .filter(|n| m.topic(n).is_none())
                .collect()
        };
        if state.ctx.config.auto_create_topics
            && req.allow_auto_topic_creation
            && !missing.is_empty()
        {
            for name in missing {
                let n = state.ctx.config.default_partitions;
                if let Err(e) =
                    super::admin::create_topic(state, &name, n, Default::default()).await
                {
                    tracing::debug!(topic = %name, error = %e.1, "auto-create");
                }
            }
        }
    }
    let m = state.meta.borrow();
    let describe = |name: &str| -> MetadataResponseTopic {
        let Some(t) = m.topic(name) else {
            return MetadataResponseTopic::default()
                .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                .with_name(Some(TopicName(str_bytes(name))));
        };
        let partitions = (0..t.partitions as i32)
            .map(|p| {
                MetadataResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_id(BrokerId(node))
                    .with_leader_epoch(0)
                    .with_replica_nodes(vec![BrokerId(node)])
                    .with_isr_nodes(vec![BrokerId(node)])
            })
            .collect();
        let mut topic = MetadataResponseTopic::default()
            .with_name(Some(TopicName(str_bytes(name))))
            .with_partitions(partitions);
        if version >= 1 {
            topic.is_internal = name == crate::group::OFFSETS_TOPIC;
        }
        if version >= 10 {
            topic.topic_id = Uuid::from_bytes(t.topic_id);
        }
        topic
    };
    let topics: Vec<MetadataResponseTopic> = match wanted {
        None => m.topics.keys().map(|n| describe(n)).collect(),
        Some(w) => w
            .into_iter()
            .map(|(name, id)| match name {
                Some(n) => describe(&n),
                None => match m
                    .topics
                    .values()
                    .find(|t| Uuid::from_bytes(t.topic_id) == id)
                {
                    Some(t) => describe(&t.name.clone()),
                    None => MetadataResponseTopic::default()
                        .with_error_code(codes::UNKNOWN_TOPIC_ID)
                        .with_topic_id(id),
                },
            })
            .collect(),
    };
    let mut resp = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(node))
            .with_host(str_bytes(host))
            .with_port(port as i32)])
        .with_topics(topics);
    if version >= 1 {
        resp.controller_id = BrokerId(node);
    }
    if version >= 2 {
        resp.cluster_id = Some(str_bytes(state.ctx.cluster_id.clone()));
    }
    resp
}
