//! Kafka error codes the broker answers with (Kafka's `Errors` enum), and the mapping from
//! engine and metastore errors to them.

use engine::LogError;

pub const NONE: i16 = 0;
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const CORRUPT_MESSAGE: i16 = 2;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub const REQUEST_TIMED_OUT: i16 = 7;
pub const MESSAGE_TOO_LARGE: i16 = 10;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const INVALID_REQUIRED_ACKS: i16 = 21;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
pub const INVALID_CONFIG: i16 = 40;
pub const NOT_CONTROLLER: i16 = 41;
pub const INVALID_REQUEST: i16 = 42;
pub const POLICY_VIOLATION: i16 = 44;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const UNKNOWN_PRODUCER_ID: i16 = 59;
pub const INVALID_RECORD: i16 = 87;
pub const UNKNOWN_TOPIC_ID: i16 = 100;

/// The Kafka error code for an engine error on a partition.
pub fn for_log_error(e: &LogError) -> i16 {
    use engine::batch::BatchError;
    match e {
        LogError::InvalidBatch { source, .. } => match source {
            BatchError::TooLarge { .. } => MESSAGE_TOO_LARGE,
            BatchError::LengthMismatch { .. }
            | BatchError::InvalidRecords(_)
            | BatchError::DecompressedTooLarge { .. } => INVALID_RECORD,
            _ => CORRUPT_MESSAGE,
        },
        LogError::Poisoned { .. } | LogError::Io { .. } | LogError::NoSpace { .. } => {
            KAFKA_STORAGE_ERROR
        }
        LogError::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
        LogError::Closed { .. } => NOT_LEADER_OR_FOLLOWER,
        LogError::InvalidConfig { .. } => INVALID_CONFIG,
    }
}
