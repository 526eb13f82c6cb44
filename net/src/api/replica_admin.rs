//! Where replicas live and which one leads, as clients ask (issue #18):
//! AlterPartitionReassignments (API 45) and ListPartitionReassignments (API 46) of KIP-455,
//! and ElectLeaders (API 43, KIP-460). Each change is one metastore command per partition
//! (`Command::ReassignReplicas`, `Command::ElectLeader`; the rules are in
//! `meta::replication`); a handler answers once every live node has applied it.
//!
//! A reassignment only starts here: the new replicas copy the leader's log as followers
//! (`crate::replica`), and the ISR change that brings the last one in sync completes it;
//! a removed replica's node then deletes its copy (`reconcile`). The target may hold more or
//! fewer replicas than the partition has (a replication factor change, unless a v1 request
//! forbids it, KIP-860); a topic not replicated yet becomes one, each partition's owner its
//! first replica, and its reassigned partition grows from there. ListPartitionReassignments
//! shows the ones under way.

use std::rc::Rc;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::elect_leaders_response::{
    PartitionResult as ElectLeadersPartitionResult, ReplicaElectionResult,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ElectLeadersRequest, ElectLeadersResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse, TopicName,
};
use meta::{Assignment, Command, MetaState};

use super::admin::write;
use super::str_bytes;
use crate::codes;
use crate::core::CoreState;

/// Partitions one AlterPartitionReassignments or ElectLeaders request changes (each is a
/// metastore write); those past it are answered INVALID_REQUEST, unchanged. An election of
/// every partition (no list) elects at most this many per request.
pub const MAX_PARTITIONS_PER_REPLICA_ADMIN_REQUEST: usize = 10_000;
/// ElectLeaders' election types.
const ELECTION_PREFERRED: i8 = 0;
const ELECTION_UNCLEAN: i8 = 1;

/// An error code and its message.
type Refusal = (i16, String);

/// The broker id clients know replica `a` by (-1 for a node not registered).
pub(crate) fn broker_id_of_replica(m: &MetaState, a: Assignment) -> i32 {
    m.brokers.get(&a.node_id).map_or(-1, |b| {
        crate::brokers::broker_id_of(b, a.core_index as usize)
    })
}

/// The replica placement broker ids `ids` name for `topic`/`partition`: a node that holds a
/// replica keeps its core; a new node gets the core a core-direct id names, or its least
/// loaded core.
fn target_of(
    m: &MetaState,
    topic: &str,
    partition: u32,
    ids: &[BrokerId],
) -> Result<Vec<Assignment>, Refusal> {
    let bad = |why: String| (codes::INVALID_REPLICA_ASSIGNMENT, why);
    if ids.is_empty() {
        return Err(bad(
            "an empty replica list: name the target's brokers, or null to cancel".into(),
        ));
    }
    // Where the replicas are now: a partition not replicated has its owner.
    let current: Vec<Assignment> = match m.replica_set(topic, partition) {
        Some(r) => r.replicas.clone(),
        None => m.assignment(topic, partition).into_iter().collect(),
    };
    let mut target: Vec<Assignment> = Vec::with_capacity(ids.len());
    for id in ids {
        let registration = m
            .brokers
            .values()
            .find(|r| crate::brokers::BrokerMap::of_registration(r).is_own_broker_id(id.0))
            .ok_or_else(|| bad(format!("broker {} is not a broker of this cluster", id.0)))?;
        let node = registration.node_id;
        let named_core = crate::brokers::BrokerMap::of_registration(registration)
            .core_of_broker_id(id.0)
            .map(|c| c as u32);
        let here = current.iter().find(|a| a.node_id == node);
        let core_index = match (here, named_core) {
            (_, Some(core)) => core,
            (Some(here), None) => here.core_index,
            (None, None) => crate::cluster::least_loaded_core(m, node, registration.cores, &target),
        };
        target.push(Assignment {
            node_id: node,
            core_index,
        });
    }
    Ok(target)
}

/// AlterPartitionReassignments: starts, replaces or (null replicas) cancels each named
/// partition's reassignment.
pub async fn alter_partition_reassignments(
    state: &Rc<CoreState>,
    version: i16,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let mut budget = MAX_PARTITIONS_PER_REPLICA_ADMIN_REQUEST;
    let mut responses = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let outcome = if budget == 0 {
                Err((
                    codes::INVALID_REQUEST,
                    format!("at most {MAX_PARTITIONS_PER_REPLICA_ADMIN_REQUEST} partitions per request: send the rest in another"),
                ))
            } else {
                budget -= 1;
                // Before v1 a request may change the replication factor (Kafka's default).
                let allow_rf_change = version < 1 || req.allow_replication_factor_change;
                reassign_one(state, &name, p.partition_index, p.replicas, allow_rf_change).await
            };
            let mut r =
                ReassignablePartitionResponse::default().with_partition_index(p.partition_index);
            if let Err((code, msg)) = outcome {
                tracing::info!(topic = %name, partition = p.partition_index, code, %msg, "reassignment refused");
                r.error_code = code;
                r.error_message = Some(str_bytes(msg));
            }
            partitions.push(r);
        }
        responses.push(
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    let mut resp = AlterPartitionReassignmentsResponse::default().with_responses(responses);
    if version >= 1 {
        resp.allow_replication_factor_change = req.allow_replication_factor_change;
    }
    resp
}

async fn reassign_one(
    state: &Rc<CoreState>,
    topic: &str,
    partition: i32,
    replicas: Option<Vec<BrokerId>>,
    allow_rf_change: bool,
) -> Result<(), Refusal> {
    let unknown = || {
        (
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("unknown topic or partition {topic}/{partition}"),
        )
    };
    let partition = u32::try_from(partition).map_err(|_| unknown())?;
    let target = match replicas {
        None => None,
        Some(ids) => {
            let m = state.meta.borrow();
            if m.topic(topic).is_none_or(|t| partition >= t.partitions) {
                return Err(unknown());
            }
            if ids.len() > meta::replication::MAX_REPLICATION_FACTOR {
                return Err((
                    codes::INVALID_REPLICA_ASSIGNMENT,
                    format!(
                        "{} target replicas: at most {}",
                        ids.len(),
                        meta::replication::MAX_REPLICATION_FACTOR
                    ),
                ));
            }
            // This partition's replicas (those a reassignment under way moves to).
            let rf = m
                .replica_set(topic, partition)
                .map_or(1, |r| r.target().len());
            if ids.len() != rf && !allow_rf_change {
                // KIP-860: a client may ask that the replication factor stay as it is.
                return Err((
                    codes::INVALID_REPLICATION_FACTOR,
                    format!(
                        "{} target replicas for {topic}/{partition}, whose replication factor is {rf}, and the request does not allow a replication factor change",
                        ids.len()
                    ),
                ));
            }
            Some(target_of(&m, topic, partition, &ids)?)
        }
    };
    let cancel = target.is_none();
    write(
        state,
        Command::ReassignReplicas {
            name: topic.to_string(),
            partition,
            target: target.clone(),
        },
    )
    .await?;
    tracing::info!(topic, partition, ?target, cancel, "reassignment");
    Ok(())
}

/// ListPartitionReassignments: the reassignments under way, of the named partitions (all
/// when none are named); a partition with none under way is left out, as Kafka does.
pub fn list_partition_reassignments(
    state: &CoreState,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let m = state.meta.borrow();
    let ongoing = |name: &str, p: u32| -> Option<OngoingPartitionReassignment> {
        let r = m.replica_set(name, p).filter(|r| r.reassigning())?;
        let ids = |nodes: &[u64]| -> Vec<BrokerId> {
            nodes
                .iter()
                .filter_map(|n| r.replica_on(*n))
                .map(|a| BrokerId(broker_id_of_replica(&m, a)))
                .collect()
        };
        Some(
            OngoingPartitionReassignment::default()
                .with_partition_index(p as i32)
                .with_replicas(
                    r.replicas
                        .iter()
                        .map(|a| BrokerId(broker_id_of_replica(&m, *a)))
                        .collect(),
                )
                .with_adding_replicas(ids(&r.adding))
                .with_removing_replicas(ids(&r.removing)),
        )
    };
    let topics: Vec<OngoingTopicReassignment> = match req.topics {
        Some(named) => named
            .into_iter()
            .filter_map(|t| {
                let name = t.name.0.to_string();
                let parts: Vec<_> = t
                    .partition_indexes
                    .iter()
                    .filter_map(|&p| u32::try_from(p).ok())
                    .filter_map(|p| ongoing(&name, p))
                    .collect();
                (!parts.is_empty()).then(|| {
                    OngoingTopicReassignment::default()
                        .with_name(t.name)
                        .with_partitions(parts)
                })
            })
            .collect(),
        None => m
            .replicas
            .iter()
            .filter_map(|(name, parts)| {
                let parts: Vec<_> = (0..parts.len() as u32)
                    .filter_map(|p| ongoing(name, p))
                    .collect();
                (!parts.is_empty()).then(|| {
                    OngoingTopicReassignment::default()
                        .with_name(TopicName(str_bytes(name.clone())))
                        .with_partitions(parts)
                })
            })
            .collect(),
    };
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}

/// Whether an election of `election_type` would change `r`'s leader (the partitions an
/// ElectLeaders with no list elects).
fn election_due(m: &MetaState, r: &meta::PartitionReplicas, election_type: i8) -> bool {
    let live = |n: u64| m.brokers.get(&n).is_some_and(|b| !b.fenced);
    match election_type {
        ELECTION_UNCLEAN => r.leader.is_none(),
        _ => {
            let preferred = r.target()[0].node_id;
            r.leader != Some(preferred) && live(preferred) && r.in_sync(preferred)
        }
    }
}

/// ElectLeaders: a preferred election (type 0, and every v0 request) moves each partition's
/// leadership to its preferred replica, the first, when it is live and in sync; an unclean
/// one (type 1) gives a partition with no leader any live replica, in sync or not (records
/// may be lost). A partition not replicated answers ELECTION_NOT_NEEDED (its one replica
/// leads); no list elects every partition where the election would change the leader.
pub async fn elect_leaders(
    state: &Rc<CoreState>,
    version: i16,
    req: ElectLeadersRequest,
) -> ElectLeadersResponse {
    let election_type = if version >= 1 {
        req.election_type
    } else {
        ELECTION_PREFERRED
    };
    let named: Vec<(TopicName, Vec<i32>)> = match req.topic_partitions {
        Some(named) => named.into_iter().map(|t| (t.topic, t.partitions)).collect(),
        None => {
            let m = state.meta.borrow();
            let mut budget = MAX_PARTITIONS_PER_REPLICA_ADMIN_REQUEST;
            m.replicas
                .iter()
                .filter_map(|(name, parts)| {
                    let due: Vec<i32> = parts
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| election_due(&m, r, election_type))
                        .map(|(p, _)| p as i32)
                        .take(budget)
                        .collect();
                    budget -= due.len();
                    (!due.is_empty()).then(|| (TopicName(str_bytes(name.clone())), due))
                })
                .collect()
        }
    };
    let mut budget = MAX_PARTITIONS_PER_REPLICA_ADMIN_REQUEST;
    let mut results = Vec::with_capacity(named.len());
    for (topic, partitions) in named {
        let name = topic.0.to_string();
        let mut partition_result = Vec::with_capacity(partitions.len());
        for p in partitions {
            let outcome: Result<(), Refusal> = if election_type != ELECTION_PREFERRED
                && election_type != ELECTION_UNCLEAN
            {
                Err((
                    codes::INVALID_REQUEST,
                    format!("election type {election_type}: 0 (preferred) or 1 (unclean)"),
                ))
            } else if budget == 0 {
                Err((
                    codes::INVALID_REQUEST,
                    format!("at most {MAX_PARTITIONS_PER_REPLICA_ADMIN_REQUEST} partitions per request: send the rest in another"),
                ))
            } else if let Ok(partition) = u32::try_from(p) {
                budget -= 1;
                write(
                    state,
                    Command::ElectLeader {
                        name: name.clone(),
                        partition,
                        unclean: election_type == ELECTION_UNCLEAN,
                    },
                )
                .await
            } else {
                Err((
                    codes::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("unknown topic or partition {name}/{p}"),
                ))
            };
            let mut r = ElectLeadersPartitionResult::default().with_partition_id(p);
            match outcome {
                Ok(()) => {
                    tracing::info!(topic = %name, partition = p, election_type, "leader elected")
                }
                Err((code, msg)) => {
                    r.error_code = code;
                    r.error_message = Some(str_bytes(msg));
                }
            }
            partition_result.push(r);
        }
        results.push(
            ReplicaElectionResult::default()
                .with_topic(topic)
                .with_partition_result(partition_result),
        );
    }
    let mut r = ElectLeadersResponse::default().with_replica_election_results(results);
    if version >= 1 {
        r.error_code = codes::NONE;
    }
    r
}
