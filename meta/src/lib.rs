//! ringlog's metastore: an openraft state machine (topics, partitions, assignments, fan-out
//! links, barrier groups, brokers and the security state) running on its own thread with its
//! own current-thread tokio runtime. Other threads talk to it only over flume channels through
//! [`MetaHandle`]: commands in, applied changes out. See DESIGN.md §6.

pub mod client;
pub mod error;
pub mod liveness;
pub mod log_store;
pub mod network;
pub mod node;
pub mod replication;
pub mod sm;
pub mod state;
pub mod wire;

use std::io::Cursor;

pub use client::MetaClient;
pub use error::{MetaError, Result};
pub use node::{MetaConfig, MetaHandle, Metastore};
pub use state::{
    valid_barrier_interval, AclBinding, AppliedChange, ApplyOutcome, Assignment, BarrierGroupDef,
    BarrierGroups, BrokerRegistration, Change, ClientQuota, Command, ListenerEndpoint, MetaState,
    NewReplicatedTopic, PartitionReplicas, Proposal, QuotaAlteration, QuotaEntity, QuotaPart,
    Refusal, ScramCredential, ScramMechanism, TopicMeta, UserCredentials, BARRIER_INTERVAL_OFF_MS,
    MAX_BARRIER_GROUPS, MAX_BARRIER_GROUP_NAME_BYTES, MAX_BARRIER_INTERVAL_MS, MAX_RETAINED_CUTS,
    MAX_TOPICS_PER_BARRIER_GROUP, MIN_BARRIER_INTERVAL_MS, QUOTA_KEYS,
};
pub use wire::NodeStatus;

openraft::declare_raft_types!(
    /// openraft type configuration of the metastore.
    pub TypeConfig:
        D = state::Proposal,
        R = Vec<state::ApplyOutcome>,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type Raft = openraft::Raft<TypeConfig>;
