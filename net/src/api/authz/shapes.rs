//! Each guarded request kind's own shapes, one [`Shape`] per kind: which names of the
//! request its row's ACL is checked on, the response that refuses it whole, and how its
//! refused items are taken out and put back. The checks themselves are the [`Gate`]'s, as
//! the kind's row in `TABLE` says.

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::Gate;
use crate::acl;

/// Puts a kind's refused items back into its response, or filters the response.
pub(super) type Put<R> = Box<dyn FnOnce(&Gate<'_>, &mut R)>;

/// A guarded request kind's shapes; a kind implements what its row's scope needs.
pub(super) trait Shape {
    type Response;

    /// The response refusing this request whole, when `gate` refuses it (scope Whole).
    fn refuse(&self, _gate: &Gate, _version: i16) -> Option<Self::Response> {
        None
    }

    /// Takes the items `gate` refuses out of this request (scope PerItem, Filtered); what
    /// comes back puts them back into the response (or filters it). `None`: none refused.
    fn take(&mut self, _gate: &Gate) -> Option<Put<Self::Response>> {
        None
    }
}

/// Kafka's "none" in a refused result: no offset, timestamp, epoch, producer, node or port.
const UNKNOWN: i8 = -1;

/// The name the cluster's ACLs are on.
const CLUSTER: &str = acl::CLUSTER_RESOURCE_NAME;

/// OffsetFetch answers per group from this version, before it with one top-level code
/// from [`OFFSET_FETCH_TOP_LEVEL_ERROR_VERSION`], and per partition before that.
const OFFSET_FETCH_GROUPS_VERSION: i16 = 8;
const OFFSET_FETCH_TOP_LEVEL_ERROR_VERSION: i16 = 2;

/// FindCoordinator answers per key from this version, before it once at the top.
const FIND_COORDINATOR_BATCHED_VERSION: i16 = 4;

fn put<R>(f: impl FnOnce(&Gate<'_>, &mut R) + 'static) -> Option<Put<R>> {
    Some(Box::new(f))
}

fn message(text: &'static str) -> Option<StrBytes> {
    Some(StrBytes::from_static_str(text))
}

/// Takes the items `allowed` refuses out of `items`, keeping of each what `keep` takes.
fn take_out<T, K>(
    items: &mut Vec<T>,
    allowed: impl Fn(&T) -> bool,
    keep: impl FnMut(T) -> K,
) -> Vec<K> {
    let (ok, refused): (Vec<T>, Vec<T>) = std::mem::take(items).into_iter().partition(allowed);
    *items = ok;
    refused.into_iter().map(keep).collect()
}

/// Puts the `refused` items back at the end of the response's `list`, each as `result`
/// makes it from what was kept of it and the row's code; `None` when none was refused.
fn put_back<K: 'static, R: 'static, X: 'static>(
    refused: Vec<K>,
    list: fn(&mut R) -> &mut Vec<X>,
    result: impl Fn(K, i16) -> X + 'static,
) -> Option<Put<R>> {
    if refused.is_empty() {
        return None;
    }
    put(move |gate, r| {
        let code = gate.code();
        list(r).extend(refused.into_iter().map(|k| result(k, code)));
    })
}

/// One result per topic, each with one per partition: `topic` makes a topic's from its
/// name and its partitions' results, `partition` a partition's from its index.
fn each_partition<N, T, P>(
    topics: impl IntoIterator<Item = (N, Vec<i32>)>,
    topic: impl Fn(N, Vec<P>) -> T,
    partition: impl Fn(i32) -> P,
) -> Vec<T> {
    let results = |parts: Vec<i32>| parts.into_iter().map(&partition).collect();
    topics
        .into_iter()
        .map(|(n, ps)| topic(n, results(ps)))
        .collect()
}

/// The partition indexes of a request topic, as `index` reads each partition.
fn indexes<P>(partitions: &[P], index: impl Fn(&P) -> i32) -> Vec<i32> {
    partitions.iter().map(index).collect()
}

/// Kinds refused whole with only a top-level error code, and a message for some: the name
/// the row's ACL is checked on is the field named, or the cluster's.
macro_rules! refused_by_code {
    (@name $req:ident) => {
        CLUSTER
    };
    (@name $req:ident, $field:ident) => {
        &$req.$field
    };
    ($($req:ident => $resp:ident $(($field:ident))? $(, $text:literal)?;)*) => {$(
        impl Shape for $req {
            type Response = $resp;

            fn refuse(&self, gate: &Gate, _: i16) -> Option<$resp> {
                let name: &str = refused_by_code!(@name self $(, $field)?);
                (!gate.allows(name)).then(|| {
                    $resp::default()
                        .with_error_code(gate.code())
                        $(.with_error_message(message($text)))?
                })
            }
        }
    )*};
}

refused_by_code! {
    JoinGroupRequest => JoinGroupResponse(group_id);
    SyncGroupRequest => SyncGroupResponse(group_id);
    HeartbeatRequest => HeartbeatResponse(group_id);
    LeaveGroupRequest => LeaveGroupResponse(group_id);
    OffsetDeleteRequest => OffsetDeleteResponse(group_id);
    ConsumerGroupHeartbeatRequest => ConsumerGroupHeartbeatResponse(group_id),
        "Authorization failed: no READ on the group";
    EndTxnRequest => EndTxnResponse(transactional_id);
    DescribeAclsRequest => DescribeAclsResponse;
    DescribeUserScramCredentialsRequest => DescribeUserScramCredentialsResponse;
    DescribeLogDirsRequest => DescribeLogDirsResponse;
    DescribeQuorumRequest => DescribeQuorumResponse;
    UpdateFeaturesRequest => UpdateFeaturesResponse;
    DescribeClientQuotasRequest => DescribeClientQuotasResponse,
        "Authorization failed: no DESCRIBE_CONFIGS on the cluster";
    AlterPartitionReassignmentsRequest => AlterPartitionReassignmentsResponse,
        "reassigning partitions needs ALTER on the cluster";
    ListPartitionReassignmentsRequest => ListPartitionReassignmentsResponse,
        "listing reassignments needs DESCRIBE on the cluster";
}

impl Shape for OffsetCommitRequest {
    type Response = OffsetCommitResponse;

    fn refuse(&self, gate: &Gate, _: i16) -> Option<OffsetCommitResponse> {
        use offset_commit_response::*;
        let code = gate.refusal(&self.group_id)?;
        let topics = self.topics.iter().map(|t| {
            let parts = indexes(&t.partitions, |p| p.partition_index);
            (t.name.clone(), parts)
        });
        Some(OffsetCommitResponse::default().with_topics(each_partition(
            topics,
            |name, parts| {
                OffsetCommitResponseTopic::default()
                    .with_name(name)
                    .with_partitions(parts)
            },
            |p| {
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p)
                    .with_error_code(code)
            },
        )))
    }
}

impl Shape for TxnOffsetCommitRequest {
    type Response = TxnOffsetCommitResponse;

    fn refuse(&self, gate: &Gate, _: i16) -> Option<TxnOffsetCommitResponse> {
        use txn_offset_commit_response::*;
        let code = gate.refusal(&self.group_id)?;
        let topics = self.topics.iter().map(|t| {
            let parts = indexes(&t.partitions, |p| p.partition_index);
            (t.name.clone(), parts)
        });
        Some(
            TxnOffsetCommitResponse::default().with_topics(each_partition(
                topics,
                |name, parts| {
                    TxnOffsetCommitResponseTopic::default()
                        .with_name(name)
                        .with_partitions(parts)
                },
                |p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                },
            )),
        )
    }
}

impl Shape for OffsetFetchRequest {
    type Response = OffsetFetchResponse;

    fn refuse(&self, gate: &Gate, version: i16) -> Option<OffsetFetchResponse> {
        use offset_fetch_response::*;
        let refused = (!self.group_id.is_empty() && !gate.allows(&self.group_id))
            || self.groups.iter().any(|g| !gate.allows(&g.group_id));
        if !refused {
            return None;
        }
        let code = gate.code();
        Some(if version >= OFFSET_FETCH_GROUPS_VERSION {
            OffsetFetchResponse::default().with_groups(
                self.groups
                    .iter()
                    .map(|g| {
                        OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            )
        } else if version >= OFFSET_FETCH_TOP_LEVEL_ERROR_VERSION {
            OffsetFetchResponse::default().with_error_code(code)
        } else {
            let topics = self.topics.iter().flatten();
            OffsetFetchResponse::default().with_topics(each_partition(
                topics.map(|t| (t.name.clone(), t.partition_indexes.clone())),
                |name, parts| {
                    OffsetFetchResponseTopic::default()
                        .with_name(name)
                        .with_partitions(parts)
                },
                |p| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(UNKNOWN.into())
                        .with_error_code(code)
                },
            ))
        })
    }
}

impl Shape for FindCoordinatorRequest {
    type Response = FindCoordinatorResponse;

    fn refuse(&self, gate: &Gate, version: i16) -> Option<FindCoordinatorResponse> {
        let keys: Vec<&StrBytes> = if self.coordinator_keys.is_empty() {
            vec![&self.key]
        } else {
            self.coordinator_keys.iter().collect()
        };
        let code = keys
            .iter()
            .find_map(|k| gate.refusal_of(self.key_type, k))?;
        let nowhere = BrokerId(UNKNOWN.into());
        Some(if version >= FIND_COORDINATOR_BATCHED_VERSION {
            FindCoordinatorResponse::default().with_coordinators(
                keys.into_iter()
                    .map(|k| {
                        find_coordinator_response::Coordinator::default()
                            .with_key(k.clone())
                            .with_node_id(nowhere)
                            .with_port(UNKNOWN.into())
                            .with_error_code(code)
                    })
                    .collect(),
            )
        } else {
            FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_node_id(nowhere)
                .with_port(UNKNOWN.into())
        })
    }
}

impl Shape for InitProducerIdRequest {
    type Response = InitProducerIdResponse;

    /// Only an InitProducerId naming a transactional id is checked.
    fn refuse(&self, gate: &Gate, _: i16) -> Option<InitProducerIdResponse> {
        let code = gate.refusal(self.transactional_id.as_ref()?)?;
        Some(
            InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(UNKNOWN.into()))
                .with_producer_epoch(UNKNOWN.into()),
        )
    }
}

impl Shape for AddOffsetsToTxnRequest {
    type Response = AddOffsetsToTxnResponse;

    fn refuse(&self, gate: &Gate, _: i16) -> Option<AddOffsetsToTxnResponse> {
        let code = gate
            .refusal(&self.transactional_id)
            .or_else(|| gate.also_refusal(&self.group_id))?;
        Some(AddOffsetsToTxnResponse::default().with_error_code(code))
    }
}

impl Shape for AddPartitionsToTxnRequest {
    type Response = AddPartitionsToTxnResponse;

    /// Refused whole, in every partition, when one topic is refused too.
    fn refuse(&self, gate: &Gate, _: i16) -> Option<AddPartitionsToTxnResponse> {
        use add_partitions_to_txn_response::*;
        let topics = &self.v3_and_below_topics;
        let code = gate
            .refusal(&self.v3_and_below_transactional_id)
            .or_else(|| topics.iter().find_map(|t| gate.also_refusal(&t.name)))?;
        let results = each_partition(
            topics
                .iter()
                .map(|t| (t.name.clone(), t.partitions.clone())),
            |name, parts| {
                AddPartitionsToTxnTopicResult::default()
                    .with_name(name)
                    .with_results_by_partition(parts)
            },
            |p| {
                AddPartitionsToTxnPartitionResult::default()
                    .with_partition_index(p)
                    .with_partition_error_code(code)
            },
        );
        Some(AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results))
    }
}

impl Shape for WriteTxnMarkersRequest {
    type Response = WriteTxnMarkersResponse;

    fn refuse(&self, gate: &Gate, _: i16) -> Option<WriteTxnMarkersResponse> {
        use write_txn_markers_response::*;
        let code = gate.refusal(CLUSTER)?;
        let marker = |m: &write_txn_markers_request::WritableTxnMarker| {
            let topics = m.topics.iter();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(each_partition(
                    topics.map(|t| (t.name.clone(), t.partition_indexes.clone())),
                    |name, parts| {
                        WritableTxnMarkerTopicResult::default()
                            .with_name(name)
                            .with_partitions(parts)
                    },
                    |p| {
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(p)
                            .with_error_code(code)
                    },
                ))
        };
        Some(
            WriteTxnMarkersResponse::default()
                .with_markers(self.markers.iter().map(marker).collect()),
        )
    }
}

impl Shape for ElectLeadersRequest {
    type Response = ElectLeadersResponse;

    fn refuse(&self, gate: &Gate, _: i16) -> Option<ElectLeadersResponse> {
        use elect_leaders_response::*;
        let code = gate.refusal(CLUSTER)?;
        let topics = self.topic_partitions.iter().flatten();
        let results = each_partition(
            topics.map(|t| (t.topic.clone(), t.partitions.clone())),
            |topic, parts| {
                ReplicaElectionResult::default()
                    .with_topic(topic)
                    .with_partition_result(parts)
            },
            |p| {
                PartitionResult::default()
                    .with_partition_id(p)
                    .with_error_code(code)
            },
        );
        Some(
            ElectLeadersResponse::default()
                .with_error_code(code)
                .with_replica_election_results(results),
        )
    }
}

impl Shape for AlterReplicaLogDirsRequest {
    type Response = AlterReplicaLogDirsResponse;

    fn refuse(&self, gate: &Gate, _: i16) -> Option<AlterReplicaLogDirsResponse> {
        use alter_replica_log_dirs_response::*;
        let code = gate.refusal(CLUSTER)?;
        let topics = self.dirs.iter().flat_map(|d| d.topics.iter());
        let results = each_partition(
            topics.map(|t| (t.name.clone(), t.partitions.clone())),
            |name, parts| {
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(name)
                    .with_partitions(parts)
            },
            |p| {
                AlterReplicaLogDirPartitionResult::default()
                    .with_partition_index(p)
                    .with_error_code(code)
            },
        );
        Some(AlterReplicaLogDirsResponse::default().with_results(results))
    }
}

impl Shape for CreateAclsRequest {
    type Response = CreateAclsResponse;

    fn refuse(&self, gate: &Gate, _: i16) -> Option<CreateAclsResponse> {
        let code = gate.refusal(CLUSTER)?;
        let result = create_acls_response::AclCreationResult::default().with_error_code(code);
        Some(CreateAclsResponse::default().with_results(vec![result; self.creations.len()]))
    }
}

impl Shape for DeleteAclsRequest {
    type Response = DeleteAclsResponse;

    fn refuse(&self, gate: &Gate, _: i16) -> Option<DeleteAclsResponse> {
        let code = gate.refusal(CLUSTER)?;
        let result = delete_acls_response::DeleteAclsFilterResult::default().with_error_code(code);
        Some(DeleteAclsResponse::default().with_filter_results(vec![result; self.filters.len()]))
    }
}

impl Shape for AlterUserScramCredentialsRequest {
    type Response = AlterUserScramCredentialsResponse;

    /// One result per user named, each once.
    fn refuse(&self, gate: &Gate, _: i16) -> Option<AlterUserScramCredentialsResponse> {
        use alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
        let code = gate.refusal(CLUSTER)?;
        let deleted = self.deletions.iter().map(|d| d.name.clone());
        let mut users: Vec<StrBytes> = deleted
            .chain(self.upsertions.iter().map(|u| u.name.clone()))
            .collect();
        users.sort();
        users.dedup();
        let result = |u| {
            AlterUserScramCredentialsResult::default()
                .with_user(u)
                .with_error_code(code)
        };
        Some(
            AlterUserScramCredentialsResponse::default()
                .with_results(users.into_iter().map(result).collect()),
        )
    }
}

impl Shape for AlterClientQuotasRequest {
    type Response = AlterClientQuotasResponse;

    fn refuse(&self, gate: &Gate, _: i16) -> Option<AlterClientQuotasResponse> {
        let code = gate.refusal(CLUSTER)?;
        let entry = |e: &alter_client_quotas_request::EntryData| {
            alter_client_quotas_response::EntryData::default()
                .with_error_code(code)
                .with_entity(crate::api::client_quotas::response_entity(&e.entity))
        };
        Some(
            AlterClientQuotasResponse::default()
                .with_entries(self.entries.iter().map(entry).collect()),
        )
    }
}

/// The shape most per-item kinds share: takes the items `allowed` refuses out of `items`,
/// keeping of each what `keep` takes, and puts them back ([`put_back`]).
fn take_items<T, K: 'static, R: 'static, X: 'static>(
    items: &mut Vec<T>,
    allowed: impl Fn(&T) -> bool,
    keep: impl FnMut(T) -> K,
    list: fn(&mut R) -> &mut Vec<X>,
    result: impl Fn(K, i16) -> X + 'static,
) -> Option<Put<R>> {
    put_back(take_out(items, allowed, keep), list, result)
}

/// [`take_items`] for topics that come back with one result per partition: `keep` takes a
/// topic's name (or name and id) and partition indexes, `topic` makes its result from them
/// and its partitions' results, `partition` a partition's from its index and the code.
fn take_topics<T, N: 'static, R: 'static, X: 'static, P>(
    items: &mut Vec<T>,
    allowed: impl Fn(&T) -> bool,
    keep: impl FnMut(T) -> (N, Vec<i32>),
    list: fn(&mut R) -> &mut Vec<X>,
    topic: impl Fn(N, Vec<P>) -> X + 'static,
    partition: impl Fn(i32, i16) -> P + 'static,
) -> Option<Put<R>> {
    take_items(items, allowed, keep, list, move |(name, parts), code| {
        topic(
            name,
            parts.into_iter().map(|p| partition(p, code)).collect(),
        )
    })
}

/// The kinds whose refused topics come back with one result per partition, each row:
/// the request, its topic list, the field naming a topic (`/ id` where a topic may be named
/// by id instead) and its partitions (`.field` reads a partition's index); the response, its
/// topic list; the topic result, the setters of its name (and id) and its partitions' results;
/// the partition result, the setter of its index, and the fields that are `UNKNOWN` in it.
macro_rules! per_topic {
    (@allows $gate:ident, $t:ident, $name:ident) => {
        $gate.allows(&$t.$name)
    };
    (@allows $gate:ident, $t:ident, $name:ident, $id:ident) => {
        $gate.allows(&$gate.topic_name(&$t.$name, &$t.$id))
    };
    (@indexes $t:ident, $parts:ident) => {
        $t.$parts
    };
    (@indexes $t:ident, $parts:ident, $index:ident) => {
        indexes(&$t.$parts, |p| p.$index)
    };
    ($($req:ident.$items:ident[$name:ident $(/ $id:ident)?, $parts:ident $(.$index:ident)?]
        => $resp:ident.$list:ident[$topic:ty: $set_name:ident $(/ $set_id:ident)?, $set_parts:ident;
            $partition:ty: $set_index:ident $(, $unknown:ident)*];)*) => {$(
        impl Shape for $req {
            type Response = $resp;

            // A topic named by name alone is kept as `(name)`.
            #[allow(unused_parens)]
            fn take(&mut self, gate: &Gate) -> Option<Put<$resp>> {
                take_topics(
                    &mut self.$items,
                    |t| per_topic!(@allows gate, t, $name $(, $id)?),
                    |t| ((t.$name $(, t.$id)?), per_topic!(@indexes t, $parts $(, $index)?)),
                    |r| &mut r.$list,
                    |(name $(, $id)?), parts| {
                        <$topic>::default().$set_name(name)$(.$set_id($id))?.$set_parts(parts)
                    },
                    |p, code| {
                        <$partition>::default()
                            .$set_index(p)
                            .with_error_code(code)
                            $(.$unknown(UNKNOWN.into()))*
                    },
                )
            }
        }
    )*};
}

per_topic! {
    ProduceRequest.topic_data[name / topic_id, partition_data.index] => ProduceResponse.responses[
        TopicProduceResponse: with_name / with_topic_id, with_partition_responses;
        PartitionProduceResponse: with_index,
            with_base_offset, with_log_append_time_ms, with_log_start_offset];
    FetchRequest.topics[topic / topic_id, partitions.partition] => FetchResponse.responses[
        FetchableTopicResponse: with_topic / with_topic_id, with_partitions;
        PartitionData: with_partition_index,
            with_high_watermark, with_last_stable_offset, with_log_start_offset];
    ListOffsetsRequest.topics[name, partitions.partition_index] => ListOffsetsResponse.topics[
        list_offsets_response::ListOffsetsTopicResponse: with_name, with_partitions;
        list_offsets_response::ListOffsetsPartitionResponse: with_partition_index,
            with_timestamp, with_offset];
    OffsetForLeaderEpochRequest.topics[topic, partitions.partition]
        => OffsetForLeaderEpochResponse.topics[
        offset_for_leader_epoch_response::OffsetForLeaderTopicResult: with_topic, with_partitions;
        offset_for_leader_epoch_response::EpochEndOffset: with_partition,
            with_leader_epoch, with_end_offset];
    DeleteRecordsRequest.topics[name, partitions.partition_index] => DeleteRecordsResponse.topics[
        delete_records_response::DeleteRecordsTopicResult: with_name, with_partitions;
        delete_records_response::DeleteRecordsPartitionResult: with_partition_index,
            with_low_watermark];
    DescribeProducersRequest.topics[name, partition_indexes] => DescribeProducersResponse.topics[
        describe_producers_response::TopicResponse: with_name, with_partitions;
        describe_producers_response::PartitionResponse: with_partition_index];
}

impl Shape for CreateTopicsRequest {
    type Response = CreateTopicsResponse;

    fn take(&mut self, gate: &Gate) -> Option<Put<CreateTopicsResponse>> {
        let why = "Authorization failed: no CREATE on the cluster or the topic";
        take_items(
            &mut self.topics,
            |t| gate.allows(&t.name),
            |t| t.name,
            |r| &mut r.topics,
            move |name, code| {
                CreatableTopicResult::default()
                    .with_name(name)
                    .with_error_code(code)
                    .with_error_message(message(why))
                    .with_num_partitions(UNKNOWN.into())
                    .with_replication_factor(UNKNOWN.into())
            },
        )
    }
}

impl Shape for CreatePartitionsRequest {
    type Response = CreatePartitionsResponse;

    fn take(&mut self, gate: &Gate) -> Option<Put<CreatePartitionsResponse>> {
        use create_partitions_response::CreatePartitionsTopicResult;
        let why = "Authorization failed: no ALTER on the topic";
        take_items(
            &mut self.topics,
            |t| gate.allows(&t.name),
            |t| t.name,
            |r| &mut r.results,
            move |name, code| {
                CreatePartitionsTopicResult::default()
                    .with_name(name)
                    .with_error_code(code)
                    .with_error_message(message(why))
            },
        )
    }
}

impl Shape for DeleteTopicsRequest {
    type Response = DeleteTopicsResponse;

    /// Topics by name (`topic_names`) or, from v6, by name or id (`topics`).
    fn take(&mut self, gate: &Gate) -> Option<Put<DeleteTopicsResponse>> {
        let by_name = take_out(
            &mut self.topic_names,
            |n| gate.allows(n),
            |n| (Some(n), uuid::Uuid::nil()),
        );
        let by_id = take_out(
            &mut self.topics,
            |t| match &t.name {
                Some(n) => gate.allows(n),
                None => gate.allows(&gate.topic_name(&TopicName::default(), &t.topic_id)),
            },
            |t| (t.name, t.topic_id),
        );
        let refused = by_name.into_iter().chain(by_id).collect();
        let why = "Authorization failed: no DELETE on the topic";
        put_back(
            refused,
            |r: &mut DeleteTopicsResponse| &mut r.responses,
            move |(name, id), code| {
                delete_topics_response::DeletableTopicResult::default()
                    .with_name(name)
                    .with_topic_id(id)
                    .with_error_code(code)
                    .with_error_message(message(why))
            },
        )
    }
}

impl Shape for DescribeGroupsRequest {
    type Response = DescribeGroupsResponse;

    fn take(&mut self, gate: &Gate) -> Option<Put<DescribeGroupsResponse>> {
        take_items(
            &mut self.groups,
            |g| gate.allows(g),
            |g| g,
            |r| &mut r.groups,
            |g, code| {
                describe_groups_response::DescribedGroup::default()
                    .with_group_id(g)
                    .with_error_code(code)
            },
        )
    }
}

impl Shape for DeleteGroupsRequest {
    type Response = DeleteGroupsResponse;

    fn take(&mut self, gate: &Gate) -> Option<Put<DeleteGroupsResponse>> {
        take_items(
            &mut self.groups_names,
            |g| gate.allows(g),
            |g| g,
            |r| &mut r.results,
            |g, code| {
                delete_groups_response::DeletableGroupResult::default()
                    .with_group_id(g)
                    .with_error_code(code)
            },
        )
    }
}

impl Shape for ConsumerGroupDescribeRequest {
    type Response = ConsumerGroupDescribeResponse;

    fn take(&mut self, gate: &Gate) -> Option<Put<ConsumerGroupDescribeResponse>> {
        let why = "Authorization failed: no DESCRIBE on the group";
        take_items(
            &mut self.group_ids,
            |g| gate.allows(g),
            |g| g,
            |r| &mut r.groups,
            move |g, code| {
                consumer_group_describe_response::DescribedGroup::default()
                    .with_group_id(g)
                    .with_error_code(code)
                    .with_error_message(message(why))
            },
        )
    }
}

impl Shape for DescribeTransactionsRequest {
    type Response = DescribeTransactionsResponse;

    fn take(&mut self, gate: &Gate) -> Option<Put<DescribeTransactionsResponse>> {
        take_items(
            &mut self.transactional_ids,
            |id| gate.allows(id),
            |id| id,
            |r| &mut r.transaction_states,
            |id, code| {
                describe_transactions_response::TransactionState::default()
                    .with_transactional_id(id)
                    .with_error_code(code)
                    .with_producer_id(ProducerId(UNKNOWN.into()))
                    .with_producer_epoch(UNKNOWN.into())
            },
        )
    }
}

/// The config resources of a DescribeConfigs or (Incremental)AlterConfigs `gate` refuses,
/// taken out of `resources` (`key` reads a resource's type and name), and put back at the
/// end of the response's `list` as `result` makes each from its type, name and code
/// (a topic's or the cluster's, as its type says).
fn take_configs<T, R: 'static, X: 'static>(
    gate: &Gate,
    resources: &mut Vec<T>,
    key: impl Fn(&T) -> (i8, &StrBytes),
    list: fn(&mut R) -> &mut Vec<X>,
    result: impl Fn(i8, StrBytes, i16) -> X + 'static,
) -> Option<Put<R>> {
    let mut refused = Vec::new();
    resources.retain(|c| {
        let (rtype, name) = key(c);
        let code = gate.refusal_of(rtype, name);
        if let Some(code) = code {
            refused.push((rtype, name.clone(), code));
        }
        code.is_none()
    });
    put_back(refused, list, move |(rtype, name, code), _| {
        result(rtype, name, code)
    })
}

impl Shape for DescribeConfigsRequest {
    type Response = DescribeConfigsResponse;

    fn take(&mut self, gate: &Gate) -> Option<Put<DescribeConfigsResponse>> {
        let why = "Authorization failed: no DESCRIBE_CONFIGS on the resource";
        take_configs(
            gate,
            &mut self.resources,
            |c| (c.resource_type, &c.resource_name),
            |r| &mut r.results,
            move |rtype, name, code| {
                describe_configs_response::DescribeConfigsResult::default()
                    .with_resource_type(rtype)
                    .with_resource_name(name)
                    .with_error_code(code)
                    .with_error_message(message(why))
            },
        )
    }
}

impl Shape for IncrementalAlterConfigsRequest {
    type Response = IncrementalAlterConfigsResponse;

    fn take(&mut self, gate: &Gate) -> Option<Put<IncrementalAlterConfigsResponse>> {
        use incremental_alter_configs_response::AlterConfigsResourceResponse;
        let why = "Authorization failed: no ALTER_CONFIGS on the resource";
        take_configs(
            gate,
            &mut self.resources,
            |c| (c.resource_type, &c.resource_name),
            |r| &mut r.responses,
            move |rtype, name, code| {
                AlterConfigsResourceResponse::default()
                    .with_resource_type(rtype)
                    .with_resource_name(name)
                    .with_error_code(code)
                    .with_error_message(message(why))
            },
        )
    }
}

impl Shape for AlterConfigsRequest {
    type Response = AlterConfigsResponse;

    fn take(&mut self, gate: &Gate) -> Option<Put<AlterConfigsResponse>> {
        use alter_configs_response::AlterConfigsResourceResponse;
        let why = "Authorization failed: no ALTER_CONFIGS on the resource";
        take_configs(
            gate,
            &mut self.resources,
            |c| (c.resource_type, &c.resource_name),
            |r| &mut r.responses,
            move |rtype, name, code| {
                AlterConfigsResourceResponse::default()
                    .with_resource_type(rtype)
                    .with_resource_name(name)
                    .with_error_code(code)
                    .with_error_message(message(why))
            },
        )
    }
}

impl Shape for ListGroupsRequest {
    type Response = ListGroupsResponse;

    /// Filtered only for a principal without the row's operation on the cluster.
    fn take(&mut self, gate: &Gate) -> Option<Put<ListGroupsResponse>> {
        if gate.bypassed() {
            return None;
        }
        put(|gate, r: &mut ListGroupsResponse| r.groups.retain(|g| gate.allows(&g.group_id)))
    }
}

impl Shape for ListTransactionsRequest {
    type Response = ListTransactionsResponse;

    fn take(&mut self, _: &Gate) -> Option<Put<ListTransactionsResponse>> {
        put(|gate, r: &mut ListTransactionsResponse| {
            r.transaction_states
                .retain(|t| gate.allows(&t.transactional_id));
        })
    }
}

/// Metadata is filtered after its handler, which knows whether it was asked for all
/// topics ([`filter_metadata`]).
impl Shape for MetadataRequest {
    type Response = MetadataResponse;
}

/// DescribeTopicPartitions checks its topics in its handler, before it pages its answer
/// (`TopicAccess`).
impl Shape for DescribeTopicPartitionsRequest {
    type Response = DescribeTopicPartitionsResponse;
}

/// Metadata as `gate` lets its principal see it: topics it may not describe are hidden
/// when it asked for all, and refused (the row's code, no partitions) when it named them.
pub(super) fn filter_metadata(gate: &Gate, asked_for_all: bool, resp: &mut MetadataResponse) {
    let visible = |t: &metadata_response::MetadataResponseTopic| {
        t.name.as_ref().is_none_or(|n| gate.allows(n))
    };
    if asked_for_all {
        resp.topics.retain(visible);
    } else {
        for t in resp.topics.iter_mut().filter(|t| !visible(t)) {
            t.error_code = gate.code();
            t.partitions.clear();
            t.topic_id = uuid::Uuid::nil();
        }
    }
}
