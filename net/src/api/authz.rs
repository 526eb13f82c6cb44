//! ACL enforcement at the API boundary (issue #19, `crate::acl`): before a handler runs, the
//! request is checked against the principal's ACLs. A request-wide refusal (a group, a
//! transactional id, the cluster) answers with the API's authorization error and the handler
//! never runs; a per-topic one takes the refused topics out of the request, runs the handler
//! on the rest, and adds them back to the response with TOPIC_AUTHORIZATION_FAILED (Metadata
//! instead hides topics the principal may not describe when it asked for all).

use std::rc::Rc;

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::acl::{self, Subject};
use crate::core::CoreState;

/// Whether `who` may do `op` on `rtype`/`name` (this core's copy of the ACLs).
pub fn may(state: &CoreState, who: &Subject, op: i8, rtype: i8, name: &str) -> bool {
    acl::allowed(
        &state.meta.borrow(),
        &state.ctx.config.acl,
        who,
        op,
        rtype,
        name,
    )
}

/// Whether everything is allowed to `who` without looking (no ACL at all, and the no-ACL
/// rule opens resources to it): the common case, kept free of per-topic work.
fn all_open(state: &CoreState, who: &Subject) -> bool {
    state.meta.borrow().acls.is_empty()
        && (!who.authenticated || state.ctx.config.acl.allow_everyone_if_no_acl_found)
}

pub(crate) fn on_cluster(state: &CoreState, who: &Subject, op: i8) -> bool {
    may(
        state,
        who,
        op,
        acl::RESOURCE_CLUSTER,
        acl::CLUSTER_RESOURCE_NAME,
    )
}

/// The response that refuses a whole request for lack of an ACL, if `req` is refused so.
pub fn refuse_whole(
    state: &CoreState,
    who: &Subject,
    version: i16,
    req: &RequestKind,
) -> Option<ResponseKind> {
    use acl::*;
    if all_open(state, who) {
        return None;
    }
    let group = |op: i8, id: &str| !may(state, who, op, RESOURCE_GROUP, id);
    let txn = |id: &str| !may(state, who, OP_WRITE, RESOURCE_TRANSACTIONAL_ID, id);
    Some(match req {
        RequestKind::JoinGroup(r) if group(OP_READ, &r.group_id) => ResponseKind::JoinGroup(
            JoinGroupResponse::default().with_error_code(GROUP_AUTHORIZATION_FAILED),
        ),
        RequestKind::SyncGroup(r) if group(OP_READ, &r.group_id) => ResponseKind::SyncGroup(
            SyncGroupResponse::default().with_error_code(GROUP_AUTHORIZATION_FAILED),
        ),
        RequestKind::Heartbeat(r) if group(OP_READ, &r.group_id) => ResponseKind::Heartbeat(
            HeartbeatResponse::default().with_error_code(GROUP_AUTHORIZATION_FAILED),
        ),
        RequestKind::LeaveGroup(r) if group(OP_READ, &r.group_id) => ResponseKind::LeaveGroup(
            LeaveGroupResponse::default().with_error_code(GROUP_AUTHORIZATION_FAILED),
        ),
        RequestKind::OffsetCommit(r) if group(OP_READ, &r.group_id) => {
            let topics = r
                .topics
                .iter()
                .map(|t| {
                    offset_commit_response::OffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    offset_commit_response::OffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(GROUP_AUTHORIZATION_FAILED)
                                })
                                .collect(),
                        )
                })
                .collect();
            ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics))
        }
        RequestKind::OffsetFetch(r)
            if (!r.group_id.is_empty() && group(OP_DESCRIBE, &r.group_id))
                || r.groups.iter().any(|g| group(OP_DESCRIBE, &g.group_id)) =>
        {
            // Each version's shape: groups (v8+), a top-level code (v2+), or per partition.
            let resp = if version >= 8 {
                OffsetFetchResponse::default().with_groups(
                    r.groups
                        .iter()
                        .map(|g| {
                            offset_fetch_response::OffsetFetchResponseGroup::default()
                                .with_group_id(g.group_id.clone())
                                .with_error_code(GROUP_AUTHORIZATION_FAILED)
                        })
                        .collect(),
                )
            } else if version >= 2 {
                OffsetFetchResponse::default().with_error_code(GROUP_AUTHORIZATION_FAILED)
            } else {
                OffsetFetchResponse::default().with_topics(
                    r.topics
                        .iter()
                        .flatten()
                        .map(|t| {
                            offset_fetch_response::OffsetFetchResponseTopic::default()
                                .with_name(t.name.clone())
                                .with_partitions(
                                    t.partition_indexes
                                        .iter()
                                        .map(|p| {
                                            offset_fetch_response::OffsetFetchResponsePartition::default()
                                                .with_partition_index(*p)
                                                .with_committed_offset(-1)
                                                .with_error_code(GROUP_AUTHORIZATION_FAILED)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                )
            };
            ResponseKind::OffsetFetch(resp)
        }
        RequestKind::FindCoordinator(r) => {
            let rtype = if r.key_type == 1 {
                RESOURCE_TRANSACTIONAL_ID
            } else {
                RESOURCE_GROUP
            };
            let code = if rtype == RESOURCE_GROUP {
                GROUP_AUTHORIZATION_FAILED
            } else {
                TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            };
            let keys: Vec<&StrBytes> = if r.coordinator_keys.is_empty() {
                vec![&r.key]
            } else {
                r.coordinator_keys.iter().collect()
            };
            if keys.iter().all(|k| may(state, who, OP_DESCRIBE, rtype, k)) {
                return None;
            }
            // v4+ answers per key; earlier versions once, at the top.
            let resp = if version >= 4 {
                FindCoordinatorResponse::default().with_coordinators(
                    keys.iter()
                        .map(|k| {
                            find_coordinator_response::Coordinator::default()
                                .with_key((*k).clone())
                                .with_node_id(BrokerId(-1))
                                .with_port(-1)
                                .with_error_code(code)
                        })
                        .collect(),
                )
            } else {
                FindCoordinatorResponse::default()
                    .with_error_code(code)
                    .with_node_id(BrokerId(-1))
                    .with_port(-1)
            };
            ResponseKind::FindCoordinator(resp)
        }
        RequestKind::InitProducerId(r) if r.transactional_id.as_ref().is_some_and(|t| txn(t)) => {
            ResponseKind::InitProducerId(
                InitProducerIdResponse::default()
                    .with_error_code(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            )
        }
        RequestKind::AddOffsetsToTxn(r)
            if txn(&r.transactional_id) || group(OP_READ, &r.group_id) =>
        {
            let code = if txn(&r.transactional_id) {
                TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            } else {
                GROUP_AUTHORIZATION_FAILED
            };
            ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
        }
        RequestKind::EndTxn(r) if txn(&r.transactional_id) => ResponseKind::EndTxn(
            EndTxnResponse::default().with_error_code(TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ),
        RequestKind::AddPartitionsToTxn(r)
            if txn(&r.v3_and_below_transactional_id)
                || r.v3_and_below_topics
                    .iter()
                    .any(|t| !may(state, who, OP_WRITE, RESOURCE_TOPIC, &t.name)) =>
        {
            let code = if txn(&r.v3_and_below_transactional_id) {
                TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            } else {
                TOPIC_AUTHORIZATION_FAILED
            };
            let results = r
                .v3_and_below_topics
                .iter()
                .map(|t| {
                    add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                        .with_name(t.name.clone())
                        .with_results_by_partition(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                                        .with_partition_index(*p)
                                        .with_partition_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
            )
        }
        RequestKind::TxnOffsetCommit(r) if group(OP_READ, &r.group_id) => {
            let topics = r
                .topics
                .iter()
                .map(|t| {
                    txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(GROUP_AUTHORIZATION_FAILED)
                                })
                                .collect(),
                        )
                })
                .collect();
            ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics))
        }
        RequestKind::OffsetDelete(r) if group(OP_DELETE, &r.group_id) => {
            ResponseKind::OffsetDelete(
                OffsetDeleteResponse::default().with_error_code(GROUP_AUTHORIZATION_FAILED),
            )
        }
        RequestKind::CreateAcls(r) if !on_cluster(state, who, OP_ALTER) => {
            ResponseKind::CreateAcls(
                CreateAclsResponse::default().with_results(
                    r.creations
                        .iter()
                        .map(|_| {
                            create_acls_response::AclCreationResult::default()
                                .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DeleteAcls(r) if !on_cluster(state, who, OP_ALTER) => {
            ResponseKind::DeleteAcls(
                DeleteAclsResponse::default().with_filter_results(
                    r.filters
                        .iter()
                        .map(|_| {
                            delete_acls_response::DeleteAclsFilterResult::default()
                                .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DescribeAcls(_) if !on_cluster(state, who, OP_DESCRIBE) => {
            ResponseKind::DescribeAcls(
                DescribeAclsResponse::default().with_error_code(CLUSTER_AUTHORIZATION_FAILED),
            )
        }
        RequestKind::AlterUserScramCredentials(r) if !on_cluster(state, who, OP_ALTER) => {
            let mut users: Vec<StrBytes> = r
                .deletions
                .iter()
                .map(|d| d.name.clone())
                .chain(r.upsertions.iter().map(|u| u.name.clone()))
                .collect();
            users.sort();
            users.dedup();
            ResponseKind::AlterUserScramCredentials(
                AlterUserScramCredentialsResponse::default().with_results(
                    users
                        .into_iter()
                        .map(|u| {
                            alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                                .with_user(u)
                                .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DescribeClientQuotas(_) if !on_cluster(state, who, OP_DESCRIBE_CONFIGS) => {
            ResponseKind::DescribeClientQuotas(
                DescribeClientQuotasResponse::default()
                    .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "Authorization failed: no DESCRIBE_CONFIGS on the cluster",
                    ))),
            )
        }
        RequestKind::AlterClientQuotas(r) if !on_cluster(state, who, OP_ALTER_CONFIGS) => {
            ResponseKind::AlterClientQuotas(
                AlterClientQuotasResponse::default().with_entries(
                    r.entries
                        .iter()
                        .map(|e| {
                            alter_client_quotas_response::EntryData::default()
                                .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                                .with_entity(super::client_quotas::response_entity(&e.entity))
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DescribeLogDirs(_) if !on_cluster(state, who, OP_DESCRIBE) => {
            ResponseKind::DescribeLogDirs(
                DescribeLogDirsResponse::default().with_error_code(CLUSTER_AUTHORIZATION_FAILED),
            )
        }
        RequestKind::DescribeQuorum(_) if !on_cluster(state, who, OP_DESCRIBE) => {
            ResponseKind::DescribeQuorum(
                DescribeQuorumResponse::default().with_error_code(CLUSTER_AUTHORIZATION_FAILED),
            )
        }
        RequestKind::ElectLeaders(r) if !on_cluster(state, who, OP_ALTER) => {
            ResponseKind::ElectLeaders(
                ElectLeadersResponse::default()
                    .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                    .with_replica_election_results(
                        r.topic_partitions
                            .iter()
                            .flatten()
                            .map(|t| {
                                elect_leaders_response::ReplicaElectionResult::default()
                                    .with_topic(t.topic.clone())
                                    .with_partition_result(
                                        t.partitions
                                            .iter()
                                            .map(|p| {
                                                elect_leaders_response::PartitionResult::default()
                                                    .with_partition_id(*p)
                                                    .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    ),
            )
        }
        RequestKind::AlterPartitionReassignments(_) if !on_cluster(state, who, OP_ALTER) => {
            ResponseKind::AlterPartitionReassignments(
                AlterPartitionReassignmentsResponse::default()
                    .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "reassigning partitions needs ALTER on the cluster",
                    ))),
            )
        }
        RequestKind::ListPartitionReassignments(_) if !on_cluster(state, who, OP_DESCRIBE) => {
            ResponseKind::ListPartitionReassignments(
                ListPartitionReassignmentsResponse::default()
                    .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "listing reassignments needs DESCRIBE on the cluster",
                    ))),
            )
        }
        RequestKind::AlterReplicaLogDirs(r) if !on_cluster(state, who, OP_ALTER) => {
            ResponseKind::AlterReplicaLogDirs(
                AlterReplicaLogDirsResponse::default().with_results(
                    r.dirs
                        .iter()
                        .flat_map(|d| d.topics.iter())
                        .map(|t| {
                            alter_replica_log_dirs_response::AlterReplicaLogDirTopicResult::default()
                                .with_topic_name(t.name.clone())
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            alter_replica_log_dirs_response::AlterReplicaLogDirPartitionResult::default()
                                                .with_partition_index(*p)
                                                .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::WriteTxnMarkers(r) if !on_cluster(state, who, OP_CLUSTER_ACTION) => {
            ResponseKind::WriteTxnMarkers(
                WriteTxnMarkersResponse::default().with_markers(
                    r.markers
                        .iter()
                        .map(|m| {
                            write_txn_markers_response::WritableTxnMarkerResult::default()
                                .with_producer_id(m.producer_id)
                                .with_topics(
                                    m.topics
                                        .iter()
                                        .map(|t| {
                                            write_txn_markers_response::WritableTxnMarkerTopicResult::default()
                                                .with_name(t.name.clone())
                                                .with_partitions(
                                                    t.partition_indexes
                                                        .iter()
                                                        .map(|p| {
                                                            write_txn_markers_response::WritableTxnMarkerPartitionResult::default()
                                                                .with_partition_index(*p)
                                                                .with_error_code(CLUSTER_AUTHORIZATION_FAILED)
                                                        })
                                                        .collect(),
                                                )
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::ConsumerGroupHeartbeat(r) if group(OP_READ, &r.group_id) => {
            ResponseKind::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatResponse::default()
                    .with_error_code(GROUP_AUTHORIZATION_FAILED)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "Authorization failed: no READ on the group",
                    ))),
            )
        }
        RequestKind::DescribeUserScramCredentials(_) if !on_cluster(state, who, OP_DESCRIBE) => {
            ResponseKind::DescribeUserScramCredentials(
                DescribeUserScramCredentialsResponse::default()
                    .with_error_code(CLUSTER_AUTHORIZATION_FAILED),
            )
        }
        _ => return None,
    })
}

/// The topics of a per-topic request `who` may not use: taken out of the request here,
/// given back by [`restore_refused`] as TOPIC_AUTHORIZATION_FAILED.
pub enum Refused {
    None,
    Produce(Vec<(TopicName, uuid::Uuid, Vec<i32>)>),
    Fetch(Vec<(TopicName, uuid::Uuid, Vec<i32>)>),
    CreateTopics(Vec<TopicName>),
    ListOffsets(Vec<(TopicName, Vec<i32>)>),
    OffsetForLeaderEpoch(Vec<(TopicName, Vec<i32>)>),
    /// Topics by name or id (DeleteTopics v6 names them either way).
    DeleteTopics(Vec<(Option<TopicName>, uuid::Uuid)>),
    CreatePartitions(Vec<TopicName>),
    DescribeGroups(Vec<GroupId>),
    DeleteGroups(Vec<GroupId>),
    /// ListGroups: the answer lists only the groups `who` may describe.
    ListGroups(Rc<Subject>),
    /// DescribeConfigs and IncrementalAlterConfigs: (resource type, name, error) each.
    Configs(Vec<(i8, StrBytes, i16)>),
    DeleteRecords(Vec<(TopicName, Vec<i32>)>),
    DescribeProducers(Vec<(TopicName, Vec<i32>)>),
    DescribeTransactions(Vec<TransactionalId>),
    /// ListTransactions: the answer lists only the ids `who` may describe.
    ListTransactions(Rc<Subject>),
    ConsumerGroupDescribe(Vec<GroupId>),
}

/// Takes the items `allowed` refuses out of `items`; `None` when it refuses none.
fn split_refused<T>(items: &mut Vec<T>, allowed: impl Fn(&T) -> bool) -> Option<Vec<T>> {
    let (ok, refused): (Vec<T>, Vec<T>) = std::mem::take(items).into_iter().partition(allowed);
    *items = ok;
    (!refused.is_empty()).then_some(refused)
}

/// Kafka's config resource types a DescribeConfigs or IncrementalAlterConfigs names.
const CONFIG_RESOURCE_TOPIC: i8 = 2;

/// Whether `who` may do `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config resource: a
/// topic's on the topic, a broker's on the cluster; the code a refusal carries.
fn config_refusal(state: &CoreState, who: &Subject, op: i8, rtype: i8, name: &str) -> Option<i16> {
    if rtype == CONFIG_RESOURCE_TOPIC {
        (!may(state, who, op, acl::RESOURCE_TOPIC, name)).then_some(acl::TOPIC_AUTHORIZATION_FAILED)
    } else {
        (!on_cluster(state, who, op)).then_some(acl::CLUSTER_AUTHORIZATION_FAILED)
    }
}

/// Takes the config resources `who` may not `op` out of `resources`.
fn take_config_refusals<T>(
    state: &CoreState,
    who: &Subject,
    op: i8,
    resources: &mut Vec<T>,
    key: impl Fn(&T) -> (i8, &StrBytes),
) -> Refused {
    let mut refused = Vec::new();
    resources.retain(|c| {
        let (rtype, name) = key(c);
        let code = config_refusal(state, who, op, rtype, name);
        if let Some(code) = code {
            refused.push((rtype, name.clone(), code));
        }
        code.is_none()
    });
    if refused.is_empty() {
        Refused::None
    } else {
        Refused::Configs(refused)
    }
}

/// Takes the topics `who` may not use out of `req`.
pub fn take_refused(state: &CoreState, who: &Rc<Subject>, req: &mut RequestKind) -> Refused {
    use acl::*;
    if all_open(state, who) {
        return Refused::None;
    }
    let topic_ok = |op: i8, name: &str| may(state, who, op, RESOURCE_TOPIC, name);
    let name_of = |name: &TopicName, id: &uuid::Uuid| -> String {
        if name.is_empty() {
            state
                .meta
                .topic_ids
                .borrow()
                .get(id)
                .cloned()
                .unwrap_or_default()
        } else {
            name.to_string()
        }
    };
    match req {
        RequestKind::Produce(r) => {
            let Some(refused) = split_refused(&mut r.topic_data, |t| {
                topic_ok(OP_WRITE, &name_of(&t.name, &t.topic_id))
            }) else {
                return Refused::None;
            };
            Refused::Produce(
                refused
                    .into_iter()
                    .map(|t| {
                        (
                            t.name,
                            t.topic_id,
                            t.partition_data.iter().map(|p| p.index).collect(),
                        )
                    })
                    .collect(),
            )
        }
        RequestKind::Fetch(r) => {
            let Some(refused) = split_refused(&mut r.topics, |t| {
                topic_ok(OP_READ, &name_of(&t.topic, &t.topic_id))
            }) else {
                return Refused::None;
            };
            Refused::Fetch(
                refused
                    .into_iter()
                    .map(|t| {
                        (
                            t.topic,
                            t.topic_id,
                            t.partitions.iter().map(|p| p.partition).collect(),
                        )
                    })
                    .collect(),
            )
        }
        RequestKind::CreateTopics(r) => {
            let cluster = on_cluster(state, who, OP_CREATE);
            let Some(refused) =
                split_refused(&mut r.topics, |t| cluster || topic_ok(OP_CREATE, &t.name))
            else {
                return Refused::None;
            };
            Refused::CreateTopics(refused.into_iter().map(|t| t.name).collect())
        }
        RequestKind::ListOffsets(r) => {
            let Some(refused) = split_refused(&mut r.topics, |t| topic_ok(OP_DESCRIBE, &t.name))
            else {
                return Refused::None;
            };
            Refused::ListOffsets(
                refused
                    .into_iter()
                    .map(|t| {
                        let parts = t.partitions.iter().map(|p| p.partition_index).collect();
                        (t.name, parts)
                    })
                    .collect(),
            )
        }
        RequestKind::DeleteTopics(r) => {
            let mut refused = Vec::new();
            r.topic_names.retain(|n| {
                let ok = topic_ok(OP_DELETE, n);
                if !ok {
                    refused.push((Some(n.clone()), uuid::Uuid::nil()));
                }
                ok
            });
            r.topics.retain(|t| {
                let name = match &t.name {
                    Some(n) => n.to_string(),
                    None => name_of(&TopicName::default(), &t.topic_id),
                };
                let ok = topic_ok(OP_DELETE, &name);
                if !ok {
                    refused.push((t.name.clone(), t.topic_id));
                }
                ok
            });
            if refused.is_empty() {
                Refused::None
            } else {
                Refused::DeleteTopics(refused)
            }
        }
        RequestKind::DescribeGroups(r) => split_refused(&mut r.groups, |g| {
            may(state, who, OP_DESCRIBE, RESOURCE_GROUP, g)
        })
        .map_or(Refused::None, Refused::DescribeGroups),
        RequestKind::DeleteGroups(r) => split_refused(&mut r.groups_names, |g| {
            may(state, who, OP_DELETE, RESOURCE_GROUP, g)
        })
        .map_or(Refused::None, Refused::DeleteGroups),
        RequestKind::ListGroups(_) if !on_cluster(state, who, OP_DESCRIBE) => {
            Refused::ListGroups(who.clone())
        }
        RequestKind::ListTransactions(_) => Refused::ListTransactions(who.clone()),
        RequestKind::DescribeConfigs(r) => {
            take_config_refusals(state, who, OP_DESCRIBE_CONFIGS, &mut r.resources, |c| {
                (c.resource_type, &c.resource_name)
            })
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            take_config_refusals(state, who, OP_ALTER_CONFIGS, &mut r.resources, |c| {
                (c.resource_type, &c.resource_name)
            })
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            let Some(refused) = split_refused(&mut r.topics, |t| topic_ok(OP_DESCRIBE, &t.topic))
            else {
                return Refused::None;
            };
            Refused::OffsetForLeaderEpoch(
                refused
                    .into_iter()
                    .map(|t| {
                        let parts = t.partitions.iter().map(|p| p.partition).collect();
                        (t.topic, parts)
                    })
                    .collect(),
            )
        }
        RequestKind::DeleteRecords(r) => {
            let Some(refused) = split_refused(&mut r.topics, |t| topic_ok(OP_DELETE, &t.name))
            else {
                return Refused::None;
            };
            Refused::DeleteRecords(
                refused
                    .into_iter()
                    .map(|t| {
                        let parts = t.partitions.iter().map(|p| p.partition_index).collect();
                        (t.name, parts)
                    })
                    .collect(),
            )
        }
        RequestKind::DescribeProducers(r) => {
            let Some(refused) = split_refused(&mut r.topics, |t| topic_ok(OP_READ, &t.name)) else {
                return Refused::None;
            };
            Refused::DescribeProducers(
                refused
                    .into_iter()
                    .map(|t| (t.name, t.partition_indexes))
                    .collect(),
            )
        }
        RequestKind::DescribeTransactions(r) => split_refused(&mut r.transactional_ids, |id| {
            may(state, who, OP_DESCRIBE, RESOURCE_TRANSACTIONAL_ID, id)
        })
        .map_or(Refused::None, Refused::DescribeTransactions),
        RequestKind::ConsumerGroupDescribe(r) => split_refused(&mut r.group_ids, |g| {
            may(state, who, OP_DESCRIBE, RESOURCE_GROUP, g)
        })
        .map_or(Refused::None, Refused::ConsumerGroupDescribe),
        RequestKind::CreatePartitions(r) => {
            let Some(refused) = split_refused(&mut r.topics, |t| topic_ok(OP_ALTER, &t.name))
            else {
                return Refused::None;
            };
            Refused::CreatePartitions(refused.into_iter().map(|t| t.name).collect())
        }
        _ => Refused::None,
    }
}

/// Adds the refused topics (and groups) back to `resp` with their authorization error.
pub fn restore_refused(state: &CoreState, refused: Refused, resp: &mut ResponseKind) {
    use acl::TOPIC_AUTHORIZATION_FAILED as DENIED;
    match (refused, resp) {
        (Refused::None, _) => {}
        (Refused::DescribeGroups(groups), ResponseKind::DescribeGroups(r)) => {
            for g in groups {
                r.groups.push(
                    describe_groups_response::DescribedGroup::default()
                        .with_group_id(g)
                        .with_error_code(acl::GROUP_AUTHORIZATION_FAILED),
                );
            }
        }
        (Refused::DeleteGroups(groups), ResponseKind::DeleteGroups(r)) => {
            for g in groups {
                r.results.push(
                    delete_groups_response::DeletableGroupResult::default()
                        .with_group_id(g)
                        .with_error_code(acl::GROUP_AUTHORIZATION_FAILED),
                );
            }
        }
        (Refused::ListGroups(who), ResponseKind::ListGroups(r)) => {
            r.groups.retain(|g| {
                may(
                    state,
                    &who,
                    acl::OP_DESCRIBE,
                    acl::RESOURCE_GROUP,
                    &g.group_id,
                )
            });
        }
        (Refused::ListTransactions(who), ResponseKind::ListTransactions(r)) => {
            r.transaction_states.retain(|t| {
                may(
                    state,
                    &who,
                    acl::OP_DESCRIBE,
                    acl::RESOURCE_TRANSACTIONAL_ID,
                    &t.transactional_id,
                )
            });
        }
        (Refused::Configs(refused), ResponseKind::DescribeConfigs(r)) => {
            for (rtype, name, code) in refused {
                r.results.push(
                    describe_configs_response::DescribeConfigsResult::default()
                        .with_resource_type(rtype)
                        .with_resource_name(name)
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Authorization failed: no DESCRIBE_CONFIGS on the resource",
                        ))),
                );
            }
        }
        (Refused::Configs(refused), ResponseKind::IncrementalAlterConfigs(r)) => {
            for (rtype, name, code) in refused {
                r.responses.push(
                    incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                        .with_resource_type(rtype)
                        .with_resource_name(name)
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Authorization failed: no ALTER_CONFIGS on the resource",
                        ))),
                );
            }
        }
        (Refused::DeleteRecords(topics), ResponseKind::DeleteRecords(r)) => {
            for (name, parts) in topics {
                r.topics.push(
                    delete_records_response::DeleteRecordsTopicResult::default()
                        .with_name(name)
                        .with_partitions(
                            parts
                                .into_iter()
                                .map(|p| {
                                    delete_records_response::DeleteRecordsPartitionResult::default()
                                        .with_partition_index(p)
                                        .with_low_watermark(-1)
                                        .with_error_code(DENIED)
                                })
                                .collect(),
                        ),
                );
            }
        }
        (Refused::DescribeProducers(topics), ResponseKind::DescribeProducers(r)) => {
            for (name, parts) in topics {
                r.topics.push(
                    describe_producers_response::TopicResponse::default()
                        .with_name(name)
                        .with_partitions(
                            parts
                                .into_iter()
                                .map(|p| {
                                    describe_producers_response::PartitionResponse::default()
                                        .with_partition_index(p)
                                        .with_error_code(DENIED)
                                })
                                .collect(),
                        ),
                );
            }
        }
        (Refused::DescribeTransactions(ids), ResponseKind::DescribeTransactions(r)) => {
            for id in ids {
                r.transaction_states.push(
                    describe_transactions_response::TransactionState::default()
                        .with_transactional_id(id)
                        .with_error_code(acl::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1),
                );
            }
        }
        (Refused::ConsumerGroupDescribe(groups), ResponseKind::ConsumerGroupDescribe(r)) => {
            for g in groups {
                r.groups.push(
                    consumer_group_describe_response::DescribedGroup::default()
                        .with_group_id(g)
                        .with_error_code(acl::GROUP_AUTHORIZATION_FAILED)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Authorization failed: no DESCRIBE on the group",
                        ))),
                );
            }
        }
        (Refused::Produce(topics), ResponseKind::Produce(r)) => {
            for (name, id, parts) in topics {
                r.responses.push(
                    TopicProduceResponse::default()
                        .with_name(name)
                        .with_topic_id(id)
                        .with_partition_responses(
                            parts
                                .into_iter()
                                .map(|p| {
                                    PartitionProduceResponse::default()
                                        .with_index(p)
                                        .with_error_code(DENIED)
                                        .with_base_offset(-1)
                                        .with_log_append_time_ms(-1)
                                        .with_log_start_offset(-1)
                                })
                                .collect(),
                        ),
                );
            }
        }
        (Refused::Fetch(topics), ResponseKind::Fetch(r)) => {
            for (name, id, parts) in topics {
                r.responses.push(
                    FetchableTopicResponse::default()
                        .with_topic(name)
                        .with_topic_id(id)
                        .with_partitions(
                            parts
                                .into_iter()
                                .map(|p| {
                                    PartitionData::default()
                                        .with_partition_index(p)
                                        .with_error_code(DENIED)
                                        .with_high_watermark(-1)
                                        .with_last_stable_offset(-1)
                                        .with_log_start_offset(-1)
                                })
                                .collect(),
                        ),
                );
            }
        }
        (Refused::ListOffsets(topics), ResponseKind::ListOffsets(r)) => {
            for (name, parts) in topics {
                r.topics.push(
                    list_offsets_response::ListOffsetsTopicResponse::default()
                        .with_name(name)
                        .with_partitions(
                            parts
                                .into_iter()
                                .map(|p| {
                                    list_offsets_response::ListOffsetsPartitionResponse::default()
                                        .with_partition_index(p)
                                        .with_error_code(DENIED)
                                        .with_timestamp(-1)
                                        .with_offset(-1)
                                })
                                .collect(),
                        ),
                );
            }
        }
        (Refused::OffsetForLeaderEpoch(topics), ResponseKind::OffsetForLeaderEpoch(r)) => {
            for (name, parts) in topics {
                r.topics.push(
                    offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default()
                        .with_topic(name)
                        .with_partitions(
                            parts
                                .into_iter()
                                .map(|p| {
                                    offset_for_leader_epoch_response::EpochEndOffset::default()
                                        .with_partition(p)
                                        .with_error_code(DENIED)
                                        .with_leader_epoch(-1)
                                        .with_end_offset(-1)
                                })
                                .collect(),
                        ),
                );
            }
        }
        (Refused::DeleteTopics(topics), ResponseKind::DeleteTopics(r)) => {
            for (name, id) in topics {
                r.responses.push(
                    delete_topics_response::DeletableTopicResult::default()
                        .with_name(name)
                        .with_topic_id(id)
                        .with_error_code(DENIED)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Authorization failed: no DELETE on the topic",
                        ))),
                );
            }
        }
        (Refused::CreatePartitions(names), ResponseKind::CreatePartitions(r)) => {
            for name in names {
                r.results.push(
                    create_partitions_response::CreatePartitionsTopicResult::default()
                        .with_name(name)
                        .with_error_code(DENIED)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Authorization failed: no ALTER on the topic",
                        ))),
                );
            }
        }
        (Refused::CreateTopics(names), ResponseKind::CreateTopics(r)) => {
            for name in names {
                r.topics.push(
                    CreatableTopicResult::default()
                        .with_name(name)
                        .with_error_code(DENIED)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Authorization failed: no CREATE on the cluster or the topic",
                        )))
                        .with_num_partitions(-1)
                        .with_replication_factor(-1),
                );
            }
        }
        _ => {}
    }
}

/// Metadata for `who`: topics it may not describe are hidden when it asked for all, and
/// refused (TOPIC_AUTHORIZATION_FAILED, no partitions) when it named them.
pub fn filter_metadata(
    state: &Rc<CoreState>,
    who: &Subject,
    asked_for_all: bool,
    resp: &mut MetadataResponse,
) {
    if all_open(state, who) {
        return;
    }
    let visible = |t: &kafka_protocol::messages::metadata_response::MetadataResponseTopic| {
        t.name
            .as_ref()
            .is_none_or(|n| may(state, who, acl::OP_DESCRIBE, acl::RESOURCE_TOPIC, n))
    };
    if asked_for_all {
        resp.topics.retain(visible);
    } else {
        for t in resp.topics.iter_mut() {
            if !visible(t) {
                t.error_code = acl::TOPIC_AUTHORIZATION_FAILED;
                t.partitions.clear();
                t.topic_id = uuid::Uuid::nil();
            }
        }
    }
}
