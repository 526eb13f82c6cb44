//! The crate's error type. The broker maps it to Kafka error codes (`net::codes`).

use crate::state::Refusal;

#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The state machine refused the command (deterministic, same on every node).
    #[error("refused: {0}")]
    Refused(#[from] Refusal),
    /// This node is not the leader (and did not or could not forward).
    #[error("not the controller (leader id {leader_id:?}, address {leader_addr:?})")]
    NotController {
        leader_id: Option<u64>,
        leader_addr: Option<String>,
    },
    /// A leader-confirmed read could not be confirmed; the caller must defer.
    #[error("not confirmed by the raft leader: {reason}")]
    Unconfirmed { reason: String },
    #[error("timed out after {timeout_ms} ms: {what}")]
    Timeout { what: String, timeout_ms: u64 },
    #[error("metastore stopped")]
    Stopped,
    #[error("i/o error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("corrupt data: {context}")]
    Corrupt { context: String },
    #[error("protocol error: {context}")]
    Protocol { context: String },
    #[error("raft error: {context}")]
    Raft { context: String },
    #[error("invalid configuration: {context}")]
    Config { context: String },
    #[error("remote node error: {message}")]
    Remote { message: String },
    /// The metastore's disk is (nearly) full: the write was not proposed; retry once space is
    /// freed.
    #[error("the metastore's disk under {dir} has only {free_bytes} bytes free; free space on it and retry")]
    NoSpace { dir: String, free_bytes: u64 },
}

impl MetaError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        MetaError::Io {
            context: context.into(),
            source,
        }
    }

    pub fn raft(context: impl std::fmt::Display) -> Self {
        MetaError::Raft {
            context: context.to_string(),
        }
    }

    /// True if retrying the same request (possibly on another node) may succeed.
    pub fn is_retriable(&self) -> bool {
        !matches!(
            self,
            MetaError::Refused(_) | MetaError::Config { .. } | MetaError::Corrupt { .. }
        )
    }
}

pub type Result<T, E = MetaError> = std::result::Result<T, E>;
