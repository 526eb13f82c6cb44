//! Kafka API handlers and the table of supported versions (what ApiVersions advertises).

mod acls;
pub mod admin;
mod authz;
pub mod barrier;
mod client_quotas;
mod consumer_group;
mod epochs;
mod features;
pub mod fetch;
pub mod group;
mod leader_hint;
mod log_dirs;
mod metadata;
mod offsets;
mod produce;
mod quorum;
mod records;
mod replica_admin;
mod scram_users;
mod telemetry;
mod topic_partitions;
pub mod txn;

use std::rc::Rc;

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use crate::core::CoreState;

/// Advertised version ranges, each within what the codec (kafka-protocol 0.18, Kafka 4.1's
/// schemas, which dropped the versions KIP-896 removed) decodes. Produce advertises 0 (old
/// librdkafka turns compression off when the minimum is above 2); a Produce below v3 closes the
/// connection with a logged reason, as the codec cannot read it. Fetch starts at 4, the first
/// version that carries v2 record batches; Fetch 17–18 only add follower fields. Every maximum
/// is the newest version the codec has (a unit test holds it to that).
pub const SUPPORTED_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    // Legacy AlterConfigs: the named configs replace the resource's whole set (`admin`).
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    // KIP-848 consumer groups (`group.protocol=consumer`).
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    // Transactions (KIP-98), as transaction version 1: the newer versions belong to
    // transaction version 2 (KIP-890: AddPartitionsToTxn v4+ is the brokers' verification
    // form, EndTxn v5 and TxnOffsetCommit v5 need the `transaction.version` feature); see
    // `BELOW_THE_CODEC`. ListTransactions v2 (KIP-1152) filters by a transactional id regex.
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::DescribeQuorum, 0, 2),
    // Features fixed by the release: an update to the finalized level succeeds, any other
    // is refused (`features`).
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    // v0 would carry raw SASL tokens after the handshake; clients of this decade use v1 with
    // SaslAuthenticate.
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    // KIP-966's paged describe (`kafka-topics --describe`): ringlog has no eligible leader
    // replicas, so their lists are empty.
    (ApiKey::DescribeTopicPartitions, 0, 0),
];

/// The APIs served but not advertised, with their versions: client telemetry (KIP-714),
/// which a Kafka 4.4 broker without a client-metrics receiver does not advertise (so clients
/// do not use it) and still answers (`telemetry`): no metric is requested, a push is dropped.
pub const UNADVERTISED_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::GetTelemetrySubscriptions, 0, 0),
    (ApiKey::PushTelemetry, 0, 0),
];

/// Every API the broker serves, advertised or not, with its versions.
pub fn served_apis() -> impl Iterator<Item = &'static (ApiKey, i16, i16)> {
    SUPPORTED_APIS.iter().chain(UNADVERTISED_APIS)
}

/// The APIs advertised below the codec's newest version on purpose, with that version's
/// reason above in `SUPPORTED_APIS`.
pub const BELOW_THE_CODEC: &[ApiKey] = &[
    ApiKey::AddPartitionsToTxn,
    ApiKey::EndTxn,
    ApiKey::TxnOffsetCommit,
];

/// A decoded request, ready for a handler.
pub struct Request {
    pub header: RequestHeader,
    pub api_key: ApiKey,
    pub body: RequestKind,
    /// The client's address as Kafka shows it (`/host`).
    pub peer: String,
    /// The listener it came in on (0: the primary; `BrokerConfig::extra_listeners`): the
    /// endpoints a response names are that listener's.
    pub listener: usize,
    /// Who asks (its principal and host), for the ACLs (`crate::acl`).
    pub subject: Rc<crate::acl::Subject>,
    /// The request frame's size (after its length), what a produce quota counts.
    pub frame_bytes: usize,
    /// The throttle its produce quota earned as it was read (`crate::quota`), in ms.
    pub throttle_ms: u64,
}

/// The versions of `key` the broker serves (advertised or not: [`served_apis`]).
pub fn supported_versions(key: ApiKey) -> Option<(i16, i16)> {
    served_apis()
        .find(|(k, _, _)| *k == key)
        .map(|&(_, min, max)| (min, max))
}

pub use features::{FEATURES, FINALIZED_FEATURES_EPOCH};

/// The ApiVersions response: the ranges above and the features (tagged fields of v3+; older
/// versions do not carry them).
pub fn api_versions_response(error_code: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_supported_features(
            FEATURES
                .iter()
                .map(|&(name, level)| {
                    SupportedFeatureKey::default()
                        .with_name(str_bytes(name))
                        .with_min_version(level)
                        .with_max_version(level)
                })
                .collect(),
        )
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
        .with_finalized_features(
            FEATURES
                .iter()
                .map(|&(name, level)| {
                    FinalizedFeatureKey::default()
                        .with_name(str_bytes(name))
                        .with_min_version_level(level)
                        .with_max_version_level(level)
                })
                .collect(),
        )
        .with_api_keys(
            SUPPORTED_APIS
                .iter()
                .map(|&(k, min, max)| {
                    ApiVersion::default()
                        .with_api_key(k as i16)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        )
}

/// The first non-zero error code of a response (top level or per partition), for metrics.
pub fn first_error(resp: &ResponseKind) -> i16 {
    fn first(it: &mut dyn Iterator<Item = i16>) -> i16 {
        for c in it {
            if c != 0 {
                return c;
            }
        }
        0
    }
    match resp {
        ResponseKind::Produce(r) => first(
            &mut r
                .responses
                .iter()
                .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code)),
        ),
        ResponseKind::Fetch(r) => first(
            &mut std::iter::once(r.error_code).chain(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::ListOffsets(r) => first(
            &mut r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::Metadata(r) => first(&mut r.topics.iter().map(|t| t.error_code)),
        ResponseKind::DescribeTopicPartitions(r) => {
            first(&mut r.topics.iter().map(|t| t.error_code))
        }
        ResponseKind::CreateTopics(r) => first(&mut r.topics.iter().map(|t| t.error_code)),
        ResponseKind::DeleteTopics(r) => first(&mut r.responses.iter().map(|t| t.error_code)),
        ResponseKind::CreatePartitions(r) => first(&mut r.results.iter().map(|t| t.error_code)),
        ResponseKind::OffsetCommit(r) => first(
            &mut r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::JoinGroup(r) => r.error_code,
        ResponseKind::SyncGroup(r) => r.error_code,
        ResponseKind::Heartbeat(r) => r.error_code,
        ResponseKind::LeaveGroup(r) => r.error_code,
        ResponseKind::ConsumerGroupHeartbeat(r) => r.error_code,
        ResponseKind::ConsumerGroupDescribe(r) => first(&mut r.groups.iter().map(|g| g.error_code)),
        ResponseKind::FindCoordinator(r) => first(
            &mut std::iter::once(r.error_code).chain(r.coordinators.iter().map(|c| c.error_code)),
        ),
        ResponseKind::InitProducerId(r) => r.error_code,
        ResponseKind::OffsetDelete(r) => first(
            &mut std::iter::once(r.error_code).chain(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::DescribeCluster(r) => r.error_code,
        ResponseKind::UpdateFeatures(r) => r.error_code,
        ResponseKind::AlterConfigs(r) => first(&mut r.responses.iter().map(|r| r.error_code)),
        ResponseKind::IncrementalAlterConfigs(r) => {
            first(&mut r.responses.iter().map(|r| r.error_code))
        }
        ResponseKind::GetTelemetrySubscriptions(r) => r.error_code,
        ResponseKind::PushTelemetry(r) => r.error_code,
        ResponseKind::ApiVersions(r) => r.error_code,
        ResponseKind::AddPartitionsToTxn(r) => first(&mut std::iter::once(r.error_code).chain(
            r.results_by_topic_v3_and_below.iter().flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
            }),
        )),
        ResponseKind::AddOffsetsToTxn(r) => r.error_code,
        ResponseKind::EndTxn(r) => r.error_code,
        ResponseKind::TxnOffsetCommit(r) => first(
            &mut r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::DeleteRecords(r) => first(
            &mut r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::OffsetForLeaderEpoch(r) => first(
            &mut r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        _ => 0,
    }
}

/// The error for a request naming `topic`/`partition` that no core of this node owns:
/// NOT_LEADER_OR_FOLLOWER when another node does (`CoreState::not_owned_code`), else
/// UNKNOWN_TOPIC_OR_PARTITION (a negative index included).
pub(crate) fn not_owned(state: &crate::core::CoreState, topic: &str, partition: i32) -> i16 {
    match u32::try_from(partition) {
        Ok(p) => state.not_owned_code(topic, p),
        Err(_) => crate::codes::UNKNOWN_TOPIC_OR_PARTITION,
    }
}

pub fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// The request header's client id ("" when null), as group members are described with it.
fn client_id(header: &RequestHeader) -> String {
    header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default()
}

/// Runs the handler of `req`. `None` means no response is sent (Produce with acks=0).
pub async fn dispatch(state: &Rc<CoreState>, req: Request) -> Option<ResponseKind> {
    let version = req.header.request_api_version;
    // The ACLs first (`authz`): a request refused whole never reaches its handler; one
    // refused for some topics runs without them, and they come back refused.
    if let Some(refusal) = authz::refuse_whole(state, &req.subject, version, &req.body) {
        return Some(refusal);
    }
    let mut req = req;
    // A fetch's session before the ACLs: an incremental fetch names all its session's
    // partitions from here on, so that each is checked on every fetch.
    let session = match &mut req.body {
        RequestKind::Fetch(f) => Some(fetch::begin_session(state, version, f).await),
        _ => None,
    };
    if let Some(refusal) = session.as_ref().and_then(fetch::SessionStep::refusal) {
        return Some(ResponseKind::Fetch(refusal));
    }
    let refused = authz::take_refused(state, &req.subject, &mut req.body);
    let mut resp = handle_kind(state, version, req).await?;
    authz::restore_refused(state, refused, &mut resp);
    if let (Some(session), ResponseKind::Fetch(f)) = (session, &mut resp) {
        session.finish(state, version, f).await;
    }
    Some(resp)
}

/// The handler of `req`, whatever its ACLs (`dispatch` checked them).
async fn handle_kind(state: &Rc<CoreState>, version: i16, req: Request) -> Option<ResponseKind> {
    let (listener, subject) = (req.listener, &req.subject);
    Some(match req.body {
        RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions_response(0)),
        RequestKind::Metadata(r) => {
            let asked_for_all = r.topics.is_none()
                || (version == 0 && r.topics.as_ref().is_some_and(Vec::is_empty));
            // KIP-430: v8+ may ask for each topic's authorized operations.
            let with_operations = version >= 8 && r.include_topic_authorized_operations;
            let asker = req.header.client_id.as_deref().unwrap_or_default();
            let mut resp = metadata::handle(state, version, r, listener, asker).await;
            authz::filter_metadata(state, subject, asked_for_all, &mut resp);
            if with_operations {
                authz::add_topic_operations(state, subject, &mut resp);
            }
            ResponseKind::Metadata(resp)
        }
        RequestKind::Produce(r) => {
            let mut resp = produce::handle(state, version, r).await?;
            leader_hint::fill_produce(state, listener, version, &mut resp);
            ResponseKind::Produce(resp)
        }
        RequestKind::Fetch(r) => {
            let mut resp = fetch::handle(state, version, r).await;
            leader_hint::fill_fetch(state, listener, version, &mut resp);
            ResponseKind::Fetch(resp)
        }
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(offsets::list_offsets(state, version, r).await)
        }
        RequestKind::InitProducerId(r) if r.transactional_id.is_some() => {
            ResponseKind::InitProducerId(txn::init_producer_id(state, version, r).await)
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(offsets::init_producer_id(state, r))
        }
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(txn::add_partitions_to_txn(state, version, r).await)
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(txn::add_offsets_to_txn(state, version, r).await)
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(txn::end_txn(state, version, r).await),
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(txn::txn_offset_commit(state, r).await)
        }
        RequestKind::WriteTxnMarkers(r) => {
            ResponseKind::WriteTxnMarkers(txn::write_txn_markers(state, r).await)
        }
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(txn::describe_transactions(state, r).await)
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(txn::describe_producers(state, r).await)
        }
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(acls::create(state, r).await),
        RequestKind::DescribeAcls(r) => ResponseKind::DescribeAcls(acls::describe(state, r)),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(acls::delete(state, r).await),
        RequestKind::DescribeUserScramCredentials(r) => {
            ResponseKind::DescribeUserScramCredentials(scram_users::describe(state, r))
        }
        RequestKind::AlterUserScramCredentials(r) => {
            ResponseKind::AlterUserScramCredentials(scram_users::alter(state, r).await)
        }
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(client_quotas::describe(state, r))
        }
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(client_quotas::alter(state, r).await)
        }
        RequestKind::DescribeQuorum(r) => {
            ResponseKind::DescribeQuorum(quorum::describe_quorum(state, version, r).await)
        }
        RequestKind::UpdateFeatures(r) => {
            ResponseKind::UpdateFeatures(features::update_features(version, &r))
        }
        RequestKind::AlterReplicaLogDirs(r) => {
            ResponseKind::AlterReplicaLogDirs(log_dirs::alter_replica_log_dirs(state, r))
        }
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(replica_admin::elect_leaders(state, version, r).await)
        }
        RequestKind::AlterPartitionReassignments(r) => ResponseKind::AlterPartitionReassignments(
            replica_admin::alter_partition_reassignments(state, version, r).await,
        ),
        RequestKind::ListPartitionReassignments(r) => ResponseKind::ListPartitionReassignments(
            replica_admin::list_partition_reassignments(state, r),
        ),
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(log_dirs::describe_log_dirs(state, r).await)
        }
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(txn::list_transactions(state, r).await)
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(admin::create_topics(state, version, r).await)
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(admin::delete_topics(state, version, r).await)
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(admin::create_partitions(state, r).await)
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(admin::describe_configs(state, version, r))
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(admin::incremental_alter_configs(state, r).await)
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(admin::alter_configs(state, r).await)
        }
        RequestKind::GetTelemetrySubscriptions(r) => {
            ResponseKind::GetTelemetrySubscriptions(telemetry::get_telemetry_subscriptions(&r))
        }
        RequestKind::PushTelemetry(r) => ResponseKind::PushTelemetry(telemetry::push_telemetry(&r)),
        RequestKind::FindCoordinator(r) => ResponseKind::FindCoordinator(
            group::find_coordinator(state, version, r, listener).await,
        ),
        RequestKind::JoinGroup(r) => ResponseKind::JoinGroup(
            group::join_group(state, version, r, client_id(&req.header), req.peer).await,
        ),
        RequestKind::ConsumerGroupHeartbeat(r) => ResponseKind::ConsumerGroupHeartbeat(
            consumer_group::consumer_group_heartbeat(
                state,
                version,
                r,
                client_id(&req.header),
                req.peer,
            )
            .await,
        ),
        RequestKind::ConsumerGroupDescribe(r) => ResponseKind::ConsumerGroupDescribe(
            consumer_group::consumer_group_describe(state, r).await,
        ),
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(group::sync_group(state, version, r).await)
        }
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(group::heartbeat(state, r).await),
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(group::leave_group(state, version, r).await)
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(group::offset_commit(state, version, r).await)
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(group::offset_fetch(state, version, r).await)
        }
        RequestKind::ListGroups(r) => {
            ResponseKind::ListGroups(group::list_groups(state, version, r).await)
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(group::describe_groups(state, version, r).await)
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(group::delete_groups(state, r).await)
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(group::offset_delete(state, r).await)
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(metadata::describe_cluster(state, version, r, listener))
        }
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(topic_partitions::describe(state, subject, &r))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(records::delete_records(state, r).await)
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(epochs::offset_for_leader_epoch(state, r).await)
        }
        other => {
            // decode_request admits only the keys of `served_apis`.
            tracing::error!(request = ?other, "no handler for a supported API");
            return None;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{BELOW_THE_CODEC, SUPPORTED_APIS, UNADVERTISED_APIS};
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Message, VersionRange};

    /// The versions both the request and the response schema have (the crate's `ApiKey`
    /// table can claim more than its message types encode).
    fn codec_range(key: ApiKey) -> (i16, i16) {
        fn both<Q: Message, S: Message>() -> (i16, i16) {
            let (q, s): (VersionRange, VersionRange) = (Q::VERSIONS, S::VERSIONS);
            (q.min.max(s.min), q.max.min(s.max))
        }
        match key {
            ApiKey::Produce => both::<ProduceRequest, ProduceResponse>(),
            ApiKey::Fetch => both::<FetchRequest, FetchResponse>(),
            ApiKey::ListOffsets => both::<ListOffsetsRequest, ListOffsetsResponse>(),
            ApiKey::Metadata => both::<MetadataRequest, MetadataResponse>(),
            ApiKey::ApiVersions => both::<ApiVersionsRequest, ApiVersionsResponse>(),
            ApiKey::CreateTopics => both::<CreateTopicsRequest, CreateTopicsResponse>(),
            ApiKey::DeleteTopics => both::<DeleteTopicsRequest, DeleteTopicsResponse>(),
            ApiKey::InitProducerId => both::<InitProducerIdRequest, InitProducerIdResponse>(),
            ApiKey::DescribeConfigs => both::<DescribeConfigsRequest, DescribeConfigsResponse>(),
            ApiKey::CreatePartitions => both::<CreatePartitionsRequest, CreatePartitionsResponse>(),
            ApiKey::IncrementalAlterConfigs => {
                both::<IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse>()
            }
            ApiKey::AlterConfigs => both::<AlterConfigsRequest, AlterConfigsResponse>(),
            ApiKey::GetTelemetrySubscriptions => {
                both::<GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse>()
            }
            ApiKey::PushTelemetry => both::<PushTelemetryRequest, PushTelemetryResponse>(),
            ApiKey::FindCoordinator => both::<FindCoordinatorRequest, FindCoordinatorResponse>(),
            ApiKey::JoinGroup => both::<JoinGroupRequest, JoinGroupResponse>(),
            ApiKey::SyncGroup => both::<SyncGroupRequest, SyncGroupResponse>(),
            ApiKey::Heartbeat => both::<HeartbeatRequest, HeartbeatResponse>(),
            ApiKey::LeaveGroup => both::<LeaveGroupRequest, LeaveGroupResponse>(),
            ApiKey::OffsetCommit => both::<OffsetCommitRequest, OffsetCommitResponse>(),
            ApiKey::OffsetFetch => both::<OffsetFetchRequest, OffsetFetchResponse>(),
            ApiKey::ListGroups => both::<ListGroupsRequest, ListGroupsResponse>(),
            ApiKey::DescribeGroups => both::<DescribeGroupsRequest, DescribeGroupsResponse>(),
            ApiKey::DeleteGroups => both::<DeleteGroupsRequest, DeleteGroupsResponse>(),
            ApiKey::OffsetDelete => both::<OffsetDeleteRequest, OffsetDeleteResponse>(),
            ApiKey::ConsumerGroupHeartbeat => {
                both::<ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse>()
            }
            ApiKey::ConsumerGroupDescribe => {
                both::<ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse>()
            }
            ApiKey::DescribeCluster => both::<DescribeClusterRequest, DescribeClusterResponse>(),
            ApiKey::DescribeTopicPartitions => {
                both::<DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse>()
            }
            ApiKey::DeleteRecords => both::<DeleteRecordsRequest, DeleteRecordsResponse>(),
            ApiKey::OffsetForLeaderEpoch => {
                both::<OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse>()
            }
            ApiKey::AddPartitionsToTxn => {
                both::<AddPartitionsToTxnRequest, AddPartitionsToTxnResponse>()
            }
            ApiKey::AddOffsetsToTxn => both::<AddOffsetsToTxnRequest, AddOffsetsToTxnResponse>(),
            ApiKey::EndTxn => both::<EndTxnRequest, EndTxnResponse>(),
            ApiKey::TxnOffsetCommit => both::<TxnOffsetCommitRequest, TxnOffsetCommitResponse>(),
            ApiKey::WriteTxnMarkers => both::<WriteTxnMarkersRequest, WriteTxnMarkersResponse>(),
            ApiKey::DescribeTransactions => {
                both::<DescribeTransactionsRequest, DescribeTransactionsResponse>()
            }
            ApiKey::ListTransactions => both::<ListTransactionsRequest, ListTransactionsResponse>(),
            ApiKey::DescribeProducers => {
                both::<DescribeProducersRequest, DescribeProducersResponse>()
            }
            ApiKey::DescribeLogDirs => both::<DescribeLogDirsRequest, DescribeLogDirsResponse>(),
            ApiKey::DescribeQuorum => both::<DescribeQuorumRequest, DescribeQuorumResponse>(),
            ApiKey::UpdateFeatures => both::<UpdateFeaturesRequest, UpdateFeaturesResponse>(),
            ApiKey::AlterReplicaLogDirs => {
                both::<AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse>()
            }
            ApiKey::ElectLeaders => both::<ElectLeadersRequest, ElectLeadersResponse>(),
            ApiKey::AlterPartitionReassignments => {
                both::<AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse>()
            }
            ApiKey::ListPartitionReassignments => {
                both::<ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse>()
            }
            ApiKey::SaslHandshake => both::<SaslHandshakeRequest, SaslHandshakeResponse>(),
            ApiKey::CreateAcls => both::<CreateAclsRequest, CreateAclsResponse>(),
            ApiKey::DescribeAcls => both::<DescribeAclsRequest, DescribeAclsResponse>(),
            ApiKey::DeleteAcls => both::<DeleteAclsRequest, DeleteAclsResponse>(),
            ApiKey::DescribeUserScramCredentials => {
                both::<DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse>()
            }
            ApiKey::AlterUserScramCredentials => {
                both::<AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse>()
            }
            ApiKey::SaslAuthenticate => both::<SaslAuthenticateRequest, SaslAuthenticateResponse>(),
            ApiKey::DescribeClientQuotas => {
                both::<DescribeClientQuotasRequest, DescribeClientQuotasResponse>()
            }
            ApiKey::AlterClientQuotas => {
                both::<AlterClientQuotasRequest, AlterClientQuotasResponse>()
            }
            other => panic!("no codec range for {other:?}; add it"),
        }
    }

    #[test]
    fn advertised_ranges_are_the_codecs_newest() {
        for &(key, min, max) in SUPPORTED_APIS {
            let (cmin, cmax) = codec_range(key);
            if BELOW_THE_CODEC.contains(&key) {
                assert!(
                    max < cmax,
                    "{key:?}: below the codec, or drop it from BELOW_THE_CODEC"
                );
            } else {
                assert_eq!(max, cmax, "{key:?}: advertise the codec's newest version");
            }
            if key != ApiKey::Produce {
                assert!(min >= cmin, "{key:?}: v{min} is not decodable");
            }
        }
    }

    #[test]
    fn unadvertised_apis_are_served_at_the_codecs_versions_and_not_advertised() {
        for &(key, min, max) in UNADVERTISED_APIS {
            assert_eq!((min, max), codec_range(key), "{key:?}");
            assert_eq!(super::supported_versions(key), Some((min, max)));
            assert!(
                SUPPORTED_APIS.iter().all(|&(k, _, _)| k != key),
                "{key:?} is advertised"
            );
            assert!(super::api_versions_response(0)
                .api_keys
                .iter()
                .all(|a| a.api_key != key as i16));
        }
    }
}
