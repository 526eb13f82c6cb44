//! Kafka error codes, and the one mapping from every room's typed error to them. The codes
//! come from kafka-protocol's `ResponseError` table (Kafka's `Errors` enum); handlers name
//! them through these constants and map errors only through the `for_*` functions below.

use engine::batch::BatchError;
use engine::{LogError, PartitionError};
use kafka_protocol::ResponseError as E;
use meta::state::Refusal;
use meta::MetaError;

pub const NONE: i16 = 0;
pub const UNKNOWN_SERVER_ERROR: i16 = E::UnknownServerError.code();
pub const OFFSET_OUT_OF_RANGE: i16 = E::OffsetOutOfRange.code();
pub const CORRUPT_MESSAGE: i16 = E::CorruptMessage.code();
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = E::UnknownTopicOrPartition.code();
pub const NOT_LEADER_OR_FOLLOWER: i16 = E::NotLeaderOrFollower.code();
pub const LEADER_NOT_AVAILABLE: i16 = E::LeaderNotAvailable.code();
pub const FENCED_LEADER_EPOCH: i16 = E::FencedLeaderEpoch.code();
pub const UNKNOWN_LEADER_EPOCH: i16 = E::UnknownLeaderEpoch.code();
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = E::FetchSessionIdNotFound.code();
pub const INVALID_FETCH_SESSION_EPOCH: i16 = E::InvalidFetchSessionEpoch.code();
pub const FETCH_SESSION_TOPIC_ID_ERROR: i16 = E::FetchSessionTopicIdError.code();
pub const REQUEST_TIMED_OUT: i16 = E::RequestTimedOut.code();
pub const NOT_ENOUGH_REPLICAS: i16 = E::NotEnoughReplicas.code();
pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = E::NotEnoughReplicasAfterAppend.code();
pub const MESSAGE_TOO_LARGE: i16 = E::MessageTooLarge.code();
pub const OFFSET_METADATA_TOO_LARGE: i16 = E::OffsetMetadataTooLarge.code();
pub const COORDINATOR_NOT_AVAILABLE: i16 = E::CoordinatorNotAvailable.code();
pub const INVALID_TOPIC_EXCEPTION: i16 = E::InvalidTopicException.code();
pub const INVALID_REQUIRED_ACKS: i16 = E::InvalidRequiredAcks.code();
pub const ILLEGAL_GENERATION: i16 = E::IllegalGeneration.code();
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = E::InconsistentGroupProtocol.code();
pub const INVALID_GROUP_ID: i16 = E::InvalidGroupId.code();
pub const UNKNOWN_MEMBER_ID: i16 = E::UnknownMemberId.code();
pub const INVALID_SESSION_TIMEOUT: i16 = E::InvalidSessionTimeout.code();
pub const REBALANCE_IN_PROGRESS: i16 = E::RebalanceInProgress.code();
pub const UNSUPPORTED_VERSION: i16 = E::UnsupportedVersion.code();
pub const TOPIC_ALREADY_EXISTS: i16 = E::TopicAlreadyExists.code();
pub const INVALID_PARTITIONS: i16 = E::InvalidPartitions.code();
pub const INVALID_REPLICATION_FACTOR: i16 = E::InvalidReplicationFactor.code();
pub const INVALID_REPLICA_ASSIGNMENT: i16 = E::InvalidReplicaAssignment.code();
pub const INVALID_CONFIG: i16 = E::InvalidConfig.code();
pub const NOT_CONTROLLER: i16 = E::NotController.code();
pub const INVALID_REQUEST: i16 = E::InvalidRequest.code();
pub const INVALID_UPDATE_VERSION: i16 = E::InvalidUpdateVersion.code();
pub const POLICY_VIOLATION: i16 = E::PolicyViolation.code();
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = E::OutOfOrderSequenceNumber.code();
pub const INVALID_PRODUCER_EPOCH: i16 = E::InvalidProducerEpoch.code();
pub const KAFKA_STORAGE_ERROR: i16 = E::KafkaStorageError.code();
pub const UNKNOWN_PRODUCER_ID: i16 = E::UnknownProducerId.code();
pub const NON_EMPTY_GROUP: i16 = E::NonEmptyGroup.code();
pub const GROUP_ID_NOT_FOUND: i16 = E::GroupIdNotFound.code();
pub const MEMBER_ID_REQUIRED: i16 = E::MemberIdRequired.code();
pub const GROUP_MAX_SIZE_REACHED: i16 = E::GroupMaxSizeReached.code();
pub const UNSUPPORTED_ASSIGNOR: i16 = E::UnsupportedAssignor.code();
pub const FENCED_MEMBER_EPOCH: i16 = E::FencedMemberEpoch.code();
pub const STALE_MEMBER_EPOCH: i16 = E::StaleMemberEpoch.code();
pub const INVALID_REGULAR_EXPRESSION: i16 = E::InvalidRegularExpression.code();
pub const FENCED_INSTANCE_ID: i16 = E::FencedInstanceId.code();
pub const INVALID_RECORD: i16 = E::InvalidRecord.code();
pub const INVALID_TIMESTAMP: i16 = E::InvalidTimestamp.code();
pub const UNKNOWN_TOPIC_ID: i16 = E::UnknownTopicId.code();
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = E::GroupSubscribedToTopic.code();
pub const MISMATCHED_ENDPOINT_TYPE: i16 = E::MismatchedEndpointType.code();
pub const UNSUPPORTED_ENDPOINT_TYPE: i16 = E::UnsupportedEndpointType.code();
pub const LOG_DIR_NOT_FOUND: i16 = E::LogDirNotFound.code();
pub const ELECTION_NOT_NEEDED: i16 = E::ElectionNotNeeded.code();
pub const UNSTABLE_OFFSET_COMMIT: i16 = E::UnstableOffsetCommit.code();
pub const INVALID_TXN_STATE: i16 = E::InvalidTxnState.code();
pub const INVALID_PRODUCER_ID_MAPPING: i16 = E::InvalidProducerIdMapping.code();
pub const INVALID_TRANSACTION_TIMEOUT: i16 = E::InvalidTransactionTimeout.code();
pub const CONCURRENT_TRANSACTIONS: i16 = E::ConcurrentTransactions.code();
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = E::TransactionalIdNotFound.code();
pub const PRODUCER_FENCED: i16 = E::ProducerFenced.code();
pub const NOT_COORDINATOR: i16 = E::NotCoordinator.code();
pub const RESOURCE_NOT_FOUND: i16 = E::ResourceNotFound.code();
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = E::CoordinatorLoadInProgress.code();
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = E::UnsupportedCompressionType.code();
pub const UNKNOWN_SUBSCRIPTION_ID: i16 = E::UnknownSubscriptionId.code();
pub const TELEMETRY_TOO_LARGE: i16 = E::TelemetryTooLarge.code();

/// The Kafka error code for an invalid record batch.
pub fn for_batch_error(e: &BatchError) -> i16 {
    match e {
        BatchError::TooLarge { .. } => MESSAGE_TOO_LARGE,
        BatchError::LengthMismatch { .. }
        | BatchError::InvalidRecords(_)
        | BatchError::DecompressedTooLarge { .. }
        | BatchError::MissingKey { .. } => INVALID_RECORD,
        BatchError::InvalidTimestamp(_) => INVALID_TIMESTAMP,
        _ => CORRUPT_MESSAGE,
    }
}

/// The Kafka error code for an engine error on a partition's log.
pub fn for_log_error(e: &LogError) -> i16 {
    match e {
        LogError::InvalidBatch { source, .. } => for_batch_error(source),
        LogError::Poisoned { .. } | LogError::Io { .. } | LogError::NoSpace { .. } => {
            KAFKA_STORAGE_ERROR
        }
        LogError::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
        LogError::Closed { .. } => NOT_LEADER_OR_FOLLOWER,
        LogError::InvalidConfig { .. } => INVALID_CONFIG,
        LogError::DeleteNotAllowed { .. } => POLICY_VIOLATION,
    }
}

/// The Kafka error code for a refused produce on a partition.
pub fn for_partition_error(e: &PartitionError) -> i16 {
    match e {
        PartitionError::Log(e) => for_log_error(e),
        PartitionError::OutOfOrderSequence { .. } => OUT_OF_ORDER_SEQUENCE_NUMBER,
        PartitionError::FencedEpoch { .. } => INVALID_PRODUCER_EPOCH,
        PartitionError::TransactionNotBegun { .. } => INVALID_TXN_STATE,
        // Kafka has no code for it; the producer's transaction cannot go on here.
        PartitionError::TooManyOngoingTransactions { .. } => INVALID_TXN_STATE,
        PartitionError::Io { .. } => KAFKA_STORAGE_ERROR,
    }
}

/// The Kafka error code for a metastore refusal.
pub fn for_refusal(r: &Refusal) -> i16 {
    match r {
        Refusal::TopicAlreadyExists { .. } => TOPIC_ALREADY_EXISTS,
        Refusal::UnknownTopicOrPartition { .. } => UNKNOWN_TOPIC_OR_PARTITION,
        Refusal::InvalidPartitions { .. } => INVALID_PARTITIONS,
        Refusal::InvalidConfig { .. } | Refusal::InvalidFanout { .. } => INVALID_CONFIG,
        Refusal::InvalidTopic { .. } => INVALID_TOPIC_EXCEPTION,
        Refusal::InvalidAssignment { .. } => INVALID_REPLICA_ASSIGNMENT,
        // Broker registry and cluster id: the nodes' own writes, never a client's.
        Refusal::InvalidBroker { .. }
        | Refusal::ClusterIdSet { .. }
        | Refusal::ProducerIdsExhausted
        | Refusal::InvalidClusterId { .. } => INVALID_REQUEST,
        Refusal::InvalidAcl { .. } | Refusal::InvalidQuota { .. } => INVALID_REQUEST,
        Refusal::InvalidScramCredential { .. } => {
            kafka_protocol::ResponseError::UnacceptableCredential.code()
        }
        Refusal::NoScramCredential { .. } => RESOURCE_NOT_FOUND,
        // KFC-4's codes: an invalid definition is INVALID_CONFIG, an unknown group
        // RESOURCE_NOT_FOUND.
        Refusal::InvalidBarrierGroup { .. } => INVALID_CONFIG,
        Refusal::UnknownBarrierGroup { .. } => RESOURCE_NOT_FOUND,
        Refusal::NoReassignmentInProgress { .. } => {
            kafka_protocol::ResponseError::NoReassignmentInProgress.code()
        }
        Refusal::ElectionNotNeeded { .. } => ELECTION_NOT_NEEDED,
        Refusal::PreferredLeaderNotAvailable { .. } => {
            kafka_protocol::ResponseError::PreferredLeaderNotAvailable.code()
        }
        Refusal::EligibleLeadersNotAvailable { .. } => {
            kafka_protocol::ResponseError::EligibleLeadersNotAvailable.code()
        }
    }
}

/// The Kafka error code for a metastore error.
pub fn for_meta_error(e: &MetaError) -> i16 {
    match e {
        MetaError::Refused(r) => for_refusal(r),
        MetaError::NotController { .. } | MetaError::Unconfirmed { .. } => NOT_CONTROLLER,
        MetaError::Timeout { .. } => REQUEST_TIMED_OUT,
        MetaError::NoSpace { .. } | MetaError::Io { .. } => KAFKA_STORAGE_ERROR,
        _ => UNKNOWN_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_kafkas() {
        // A few spot checks against Kafka's Errors table.
        assert_eq!(
            (
                UNKNOWN_SERVER_ERROR,
                NOT_LEADER_OR_FOLLOWER,
                OUT_OF_ORDER_SEQUENCE_NUMBER
            ),
            (-1, 6, 45)
        );
        assert_eq!(
            (KAFKA_STORAGE_ERROR, INVALID_RECORD, UNKNOWN_TOPIC_ID),
            (56, 87, 100)
        );
    }
}
