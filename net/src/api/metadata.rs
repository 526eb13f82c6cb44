//! Metadata: the cluster's live brokers (each node, or one per core of each node in
//! core-direct mode, see `crate::brokers`), each partition led by its owner core's broker on
//! its owner node (none while that node is fenced), topics with their stable topic UUIDs.
//! DescribeCluster: the cluster id, the same brokers, and as controller core 0 of the
//! metastore leader's node.

use std::rc::Rc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use uuid::Uuid;

use super::str_bytes;
use crate::codes;
use crate::core::CoreState;

pub async fn handle(
    state: &Rc<CoreState>,
    version: i16,
    req: MetadataRequest,
    listener: usize,
    client_id: &str,
) -> MetadataResponse {
    // Which topics: null (or an empty list before v1) means all.
    let wanted: Option<Vec<(Option<String>, Uuid)>> = match req.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(
            t.into_iter()
                // A topic asked by ID may come with an empty name (the Java consumer
                // resolving the topic IDs of a KIP-848 assignment sends ""): the ID counts.
                .map(|t| {
                    let name = t.name.map(|n| n.0.to_string());
                    let by_id = !t.topic_id.is_nil() && name.as_deref().is_none_or(str::is_empty);
                    (if by_id { None } else { name }, t.topic_id)
                })
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
        if !missing.is_empty() && !state.ctx.config.auto_create_topics {
            crate::unknown_topic_log::note(client_id, &missing);
        }
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
        let partitions = (0..t.partitions)
            .map(|p| {
                let v = partition_view(state, &m, name, p);
                let mut part = MetadataResponsePartition::default()
                    .with_partition_index(p as i32)
                    .with_leader_id(BrokerId(v.leader.unwrap_or(-1)))
                    .with_leader_epoch(v.leader_epoch)
                    .with_replica_nodes(v.replicas)
                    .with_isr_nodes(v.isr);
                // No live replica can lead (Kafka's answer for a partition whose leader is
                // offline).
                if v.leader.is_none() {
                    part.error_code = codes::LEADER_NOT_AVAILABLE;
                }
                // Offline replicas are listed from v5.
                if version >= 5 {
                    part.offline_replicas = v.offline;
                }
                part
            })
            .collect();
        let mut topic = MetadataResponseTopic::default()
            .with_name(Some(TopicName(str_bytes(name))))
            .with_partitions(partitions);
        if version >= 1 {
            topic.is_internal = crate::core::is_internal_topic(name);
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
    let cluster = state.cluster_brokers_on(&m, listener);
    let brokers = cluster
        .endpoints()
        .into_iter()
        .map(|(node, e)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(e.broker_id))
                .with_host(str_bytes(e.host))
                .with_port(i32::from(e.port))
                // The rack is listed from v1.
                .with_rack(cluster.rack(node).filter(|_| version >= 1).map(str_bytes))
        })
        .collect();
    let controller = cluster.controller_id(state.ctx.meta.leader_id());
    let mut resp = MetadataResponse::default()
        .with_brokers(brokers)
        .with_topics(topics);
    if version >= 1 {
        resp.controller_id = BrokerId(controller);
    }
    if version >= 2 {
        resp.cluster_id = Some(str_bytes(state.ctx.cluster_id.clone()));
    }
    resp
}

/// A partition as the broker describes it (Metadata, DescribeTopicPartitions).
pub(super) struct PartitionView {
    /// Its leader's broker id; `None` while no replica can lead.
    pub leader: Option<i32>,
    pub leader_epoch: i32,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    /// The replicas on fenced (down) or unregistered nodes.
    pub offline: Vec<BrokerId>,
}

/// `topic`/`partition` as this core's metadata copy `m` has it. A replicated partition
/// (issue #18): its leader (none while no eligible replica is live), leader epoch, replicas,
/// ISR and the replicas on fenced nodes. An unreplicated one: its owner's broker, leader epoch
/// 0; while its node is fenced no leader, no ISR, and its one replica offline (as Kafka answers
/// for a partition whose only replica is offline).
pub(super) fn partition_view(
    state: &CoreState,
    m: &meta::MetaState,
    topic: &str,
    partition: u32,
) -> PartitionView {
    let leader = state.leader_id_in(m, topic, partition);
    let Some(r) = m.replica_set(topic, partition) else {
        return match leader {
            Some(id) => PartitionView {
                leader,
                leader_epoch: 0,
                replicas: vec![BrokerId(id)],
                isr: vec![BrokerId(id)],
                offline: vec![],
            },
            None => {
                let replica = BrokerId(offline_broker_id(m, topic, partition));
                PartitionView {
                    leader,
                    leader_epoch: 0,
                    replicas: vec![replica],
                    isr: vec![],
                    offline: vec![replica],
                }
            }
        };
    };
    let id_of = |a: meta::Assignment| BrokerId(super::replica_admin::broker_id_of_replica(m, a));
    PartitionView {
        leader,
        leader_epoch: r.leader_epoch,
        replicas: r.replicas.iter().map(|a| id_of(*a)).collect(),
        isr: r
            .isr
            .iter()
            .filter_map(|n| r.replica_on(*n))
            .map(id_of)
            .collect(),
        offline: r
            .replicas
            .iter()
            .filter(|a| m.brokers.get(&a.node_id).is_none_or(|b| b.fenced))
            .map(|a| id_of(*a))
            .collect(),
    }
}

/// The broker id that would lead `topic`/`partition` if its node were up (its registration's,
/// -1 for a node never registered): the offline replica a Metadata answer names.
fn offline_broker_id(m: &meta::MetaState, topic: &str, partition: u32) -> i32 {
    m.assignment(topic, partition)
        .map_or(-1, |a| super::replica_admin::broker_id_of_replica(m, a))
}

/// KIP-919 endpoint types (Kafka's `EndpointType`): what a DescribeCluster asks to list.
const ENDPOINT_TYPE_BROKER: i8 = 1;
const ENDPOINT_TYPE_CONTROLLER: i8 = 2;

/// KIP-430 bit field of the operations a client may perform on the cluster. With no authorizer
/// (ringlog has none) Kafka answers every operation the cluster resource supports
/// (`AclEntry.supportedOperations(CLUSTER)`): CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
/// DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
pub const CLUSTER_AUTHORIZED_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

/// DescribeCluster (v0–2), as Kafka's `AuthHelper.computeDescribeClusterResponse` answers on a
/// broker: this node's brokers as in Metadata (never fenced) and the controller id. A request for
/// controller endpoints gets MISMATCHED_ENDPOINT_TYPE, an unknown endpoint type
/// UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST at v0, whose error table predates KIP-919),
/// each with Kafka's message and nothing else.
pub fn describe_cluster(
    state: &CoreState,
    version: i16,
    req: DescribeClusterRequest,
    listener: usize,
) -> DescribeClusterResponse {
    let refuse = |code: i16, msg: String| {
        DescribeClusterResponse::default()
            .with_error_code(if version == 0 {
                codes::INVALID_REQUEST
            } else {
                code
            })
            .with_error_message(Some(str_bytes(msg)))
    };
    match req.endpoint_type {
        ENDPOINT_TYPE_BROKER => {}
        ENDPOINT_TYPE_CONTROLLER => {
            return refuse(
                codes::MISMATCHED_ENDPOINT_TYPE,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".into(),
            )
        }
        other => {
            return refuse(
                codes::UNSUPPORTED_ENDPOINT_TYPE,
                format!("Unsupported endpoint type {other}"),
            )
        }
    }
    let m = state.meta.borrow();
    let cluster = state.cluster_brokers_on(&m, listener);
    DescribeClusterResponse::default()
        .with_error_message(None)
        .with_endpoint_type(ENDPOINT_TYPE_BROKER)
        .with_cluster_id(str_bytes(state.ctx.cluster_id.clone()))
        .with_controller_id(BrokerId(cluster.controller_id(state.ctx.meta.leader_id())))
        .with_brokers(
            cluster
                .endpoints()
                .into_iter()
                .map(|(node, e)| {
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(e.broker_id))
                        .with_host(str_bytes(e.host))
                        .with_port(i32::from(e.port))
                        .with_rack(cluster.rack(node).map(str_bytes))
                        .with_is_fenced(false)
                })
                .collect(),
        )
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            CLUSTER_AUTHORIZED_OPERATIONS
        } else {
            i32::MIN
        })
}
