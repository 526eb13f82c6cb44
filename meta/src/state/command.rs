//! What a proposal carries and what applying it yields: commands, changes and refusals.

use std::collections::BTreeMap;

use rkyv::{Archive, Deserialize, Serialize};

use super::*;

/// A state-changing command, proposed through raft.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Command {
    CreateTopic {
        name: String,
        partitions: u32,
        configs: BTreeMap<String, String>,
        /// One per partition, index = partition number.
        assignments: Vec<Assignment>,
        /// Chosen by the proposer (random), so that apply stays deterministic.
        incarnation_id: String,
        topic_id: [u8; 16],
    },
    DeleteTopic {
        name: String,
    },
    AddPartitions {
        name: String,
        new_total: u32,
        /// One per new partition (`new_total - old_total` entries).
        assignments: Vec<Assignment>,
    },
    AlterConfigs {
        name: String,
        set: BTreeMap<String, String>,
        remove: Vec<String>,
    },
    SetAssignment {
        name: String,
        partition: u32,
        assignment: Assignment,
    },
    /// Attach `child` to `parent` (seed 000). `attach_offsets` holds the parent's high
    /// watermarks read by the proposer, one per parent partition.
    AttachChild {
        parent: String,
        child: String,
        delay_ms: u64,
        /// Chosen by the proposer (random), so that apply stays deterministic.
        epoch: String,
        attach_offsets: Vec<u64>,
    },
    /// Detach `child` from `parent`; the child keeps its data.
    DetachChild {
        parent: String,
        child: String,
    },
    /// A node registers (or re-registers, at each start) as a broker; it is unfenced.
    /// Boxed: the archived command stays as small as before.
    RegisterBroker {
        broker: Box<BrokerRegistration>,
    },
    /// A registered node is alive (sent every `broker-heartbeat-interval-ms`); a fenced one
    /// is unfenced. Refused for another incarnation than the registered one.
    BrokerHeartbeat {
        node_id: u64,
        incarnation: u64,
    },
    /// The metastore leader fences a node that missed its session. Refused for another
    /// incarnation, and when it would fence more than [`max_fenced_brokers`].
    FenceBroker {
        node_id: u64,
        incarnation: u64,
    },
    /// Sets the cluster id; refused once one is set (the first node to start sets it).
    SetClusterId {
        id: String,
    },
    /// Hands node `node_id` the next block of [`PRODUCER_ID_BLOCK_SIZE`] producer ids.
    AllocateProducerIds {
        node_id: u64,
    },
    /// Sets (adds or replaces) `user`'s SCRAM credential for `mechanism`.
    UpsertScramCredential {
        user: String,
        mechanism: ScramMechanism,
        credential: Box<ScramCredential>,
    },
    /// Removes `user`'s SCRAM credential for `mechanism`.
    DeleteScramCredential {
        user: String,
        mechanism: ScramMechanism,
    },
    /// Adds ACLs (those already there stay once).
    CreateAcls {
        bindings: Box<Vec<AclBinding>>,
    },
    /// Removes exactly these ACLs (the proposer matched a DeleteAcls filter on its copy).
    DeleteAcls {
        bindings: Box<Vec<AclBinding>>,
    },
    /// Sets the extra listeners of registered node `node_id` (each start of the node).
    SetBrokerListeners {
        node_id: u64,
        listeners: Box<Vec<ListenerEndpoint>>,
    },
    /// Sets and removes quota keys of one entity (none left: the entity is gone). Boxed: the
    /// archived command stays as small as before.
    AlterClientQuota {
        alter: Box<QuotaAlteration>,
    },
    /// Creates barrier group `def.name` or replaces its definition (seed 003). The topics are
    /// stored sorted, each once. Boxed: the archived command stays as small as before.
    DefineBarrierGroup {
        def: Box<BarrierGroupDef>,
    },
    /// Deletes barrier group `name` (its topics are untouched).
    DeleteBarrierGroup {
        name: String,
    },
    /// `CreateTopic` with each partition's replicas (the first of each its leader).
    /// Boxed: the archived command stays as small as before.
    CreateReplicatedTopic {
        topic: Box<NewReplicatedTopic>,
    },
    /// `AddPartitions` with each new partition's replicas.
    AddReplicatedPartitions {
        name: String,
        new_total: u32,
        replicas: Vec<Vec<Assignment>>,
    },
    /// A replicated partition's leader changes its ISR (issue #18), at the leader epoch and
    /// partition epoch it read.
    AlterIsr {
        name: String,
        partition: u32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<u64>,
    },
    /// A reassignment of a partition's replicas (KIP-455; `crate::replication`): `target`
    /// its new replicas (their count its new replication factor), the preferred leader
    /// first; `None` cancels the one under way.
    ReassignReplicas {
        name: String,
        partition: u32,
        target: Option<Vec<Assignment>>,
    },
    /// A leader election a client asks for (KIP-460, ElectLeaders; `crate::replication`):
    /// `unclean` false elects the preferred replica (the first of the replicas a
    /// reassignment under way moves to) when it is live, in sync and not leading already;
    /// true elects a live replica, in sync or not, of a partition with no leader.
    ElectLeader {
        name: String,
        partition: u32,
        unclean: bool,
    },
    /// The replica of a replicated partition on node `node_id` moves to another of its
    /// cores (`ringlog shard move`; `crate::replication`): a leader's move starts a new
    /// leader epoch.
    MoveReplicaCore {
        name: String,
        partition: u32,
        node_id: u64,
        core_index: u32,
    },
}

/// A topic of replication factor 2 or more to create (`Command::CreateReplicatedTopic`).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NewReplicatedTopic {
    pub name: String,
    pub partitions: u32,
    pub configs: BTreeMap<String, String>,
    /// One list per partition: its replicas, the preferred leader first.
    pub replicas: Vec<Vec<Assignment>>,
    pub incarnation_id: String,
    pub topic_id: [u8; 16],
}

/// One AlterClientQuotas entry: the entity, the keys to set (value as `f64::to_bits`) and
/// the keys to remove.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub set: BTreeMap<String, u64>,
    pub remove: Vec<String>,
}

impl Command {
    /// A cheap upper-bound-ish estimate of the encoded size, to keep group-commit proposals well
    /// under [`crate::log_store::MAX_LOG_ENTRY_BYTES`].
    pub fn approx_bytes(&self) -> usize {
        const OVERHEAD: usize = 64;
        const PER_ASSIGNMENT: usize = 8;
        const PER_STRING: usize = 16;
        let map = |m: &BTreeMap<String, String>| {
            m.iter()
                .map(|(k, v)| k.len() + v.len() + 2 * PER_STRING)
                .sum::<usize>()
        };
        OVERHEAD
            + match self {
                Command::CreateTopic {
                    name,
                    configs,
                    assignments,
                    incarnation_id,
                    ..
                } => {
                    name.len()
                        + map(configs)
                        + assignments.len() * PER_ASSIGNMENT
                        + incarnation_id.len()
                }
                Command::DeleteTopic { name } => name.len(),
                Command::AddPartitions {
                    name, assignments, ..
                } => name.len() + assignments.len() * PER_ASSIGNMENT,
                Command::AlterConfigs { name, set, remove } => {
                    name.len()
                        + map(set)
                        + remove.iter().map(|k| k.len() + PER_STRING).sum::<usize>()
                }
                Command::SetAssignment { name, .. } => name.len(),
                Command::AttachChild {
                    parent,
                    child,
                    epoch,
                    attach_offsets,
                    ..
                } => parent.len() + child.len() + epoch.len() + attach_offsets.len() * 8,
                Command::DetachChild { parent, child } => parent.len() + child.len(),
                Command::RegisterBroker { broker } => {
                    broker.host.len()
                        + broker.core_ports.len() * 2
                        + broker.rack.as_ref().map_or(0, String::len)
                        + PER_STRING
                }
                Command::BrokerHeartbeat { .. } | Command::FenceBroker { .. } => 16,
                Command::SetClusterId { id } => id.len(),
                Command::AllocateProducerIds { .. } => 8,
                Command::UpsertScramCredential {
                    user, credential, ..
                } => {
                    user.len()
                        + credential.salt.len()
                        + credential.stored_key.len()
                        + credential.server_key.len()
                        + 4 * PER_STRING
                }
                Command::DeleteScramCredential { user, .. } => user.len() + PER_STRING,
                Command::CreateAcls { bindings } | Command::DeleteAcls { bindings } => bindings
                    .iter()
                    .map(|b| {
                        b.resource_name.len()
                            + b.principal.len()
                            + b.host.len()
                            + 3 * PER_STRING
                            + 4
                    })
                    .sum(),
                Command::SetBrokerListeners { listeners, .. } => listeners
                    .iter()
                    .map(|l| l.name.len() + l.host.len() + 2 * PER_STRING + 2)
                    .sum(),
                Command::AlterClientQuota { alter } => {
                    let part = |p: &QuotaPart| match p {
                        QuotaPart::Named(n) => n.len() + PER_STRING,
                        _ => 4,
                    };
                    part(&alter.entity.user)
                        + part(&alter.entity.client_id)
                        + alter
                            .set
                            .keys()
                            .map(|k| k.len() + PER_STRING + 8)
                            .sum::<usize>()
                        + alter
                            .remove
                            .iter()
                            .map(|k| k.len() + PER_STRING)
                            .sum::<usize>()
                }
                Command::DefineBarrierGroup { def } => {
                    def.name.len()
                        + PER_STRING
                        + def
                            .topics
                            .iter()
                            .map(|t| t.len() + PER_STRING)
                            .sum::<usize>()
                        + 12
                }
                Command::DeleteBarrierGroup { name } => name.len() + PER_STRING,
                Command::CreateReplicatedTopic { topic } => {
                    topic.name.len()
                        + map(&topic.configs)
                        + topic
                            .replicas
                            .iter()
                            .map(|r| PER_STRING + r.len() * PER_ASSIGNMENT)
                            .sum::<usize>()
                        + topic.incarnation_id.len()
                }
                Command::AddReplicatedPartitions { name, replicas, .. } => {
                    name.len()
                        + replicas
                            .iter()
                            .map(|r| PER_STRING + r.len() * PER_ASSIGNMENT)
                            .sum::<usize>()
                }
                Command::AlterIsr { name, isr, .. } => name.len() + 12 + isr.len() * 8,
                Command::ReassignReplicas { name, target, .. } => {
                    name.len() + 8 + target.as_ref().map_or(0, |t| t.len() * PER_ASSIGNMENT)
                }
                Command::ElectLeader { name, .. } => name.len() + 5,
                Command::MoveReplicaCore { name, .. } => name.len() + 16,
            }
    }

    /// A define-barrier-group command (the topics are sorted and deduplicated when applied).
    pub fn define_barrier_group(
        name: impl Into<String>,
        topics: impl IntoIterator<Item = impl Into<String>>,
        interval_ms: u64,
        retained_cuts: u32,
    ) -> Command {
        Command::DefineBarrierGroup {
            def: Box::new(BarrierGroupDef {
                name: name.into(),
                topics: topics.into_iter().map(Into::into).collect(),
                interval_ms,
                retained_cuts,
            }),
        }
    }

    /// An attach command with a fresh random epoch (8 random bytes in hex).
    pub fn attach_child(
        parent: impl Into<String>,
        child: impl Into<String>,
        delay_ms: u64,
        attach_offsets: Vec<u64>,
    ) -> Command {
        Command::AttachChild {
            parent: parent.into(),
            child: child.into(),
            delay_ms,
            epoch: format!("{:016x}", random_u64()),
            attach_offsets,
        }
    }

    /// A create-topic command with a fresh random incarnation id and topic UUID.
    pub fn create_topic(
        name: impl Into<String>,
        partitions: u32,
        configs: BTreeMap<String, String>,
        assignments: Vec<Assignment>,
    ) -> Command {
        let (a, b) = (random_u64(), random_u64());
        let mut topic_id = [0u8; 16];
        topic_id[..8].copy_from_slice(&a.to_be_bytes());
        topic_id[8..].copy_from_slice(&b.to_be_bytes());
        // RFC 4122 version 4 / variant bits, like Kafka's Uuid.randomUuid().
        topic_id[6] = (topic_id[6] & 0x0f) | 0x40;
        topic_id[8] = (topic_id[8] & 0x3f) | 0x80;
        Command::CreateTopic {
            name: name.into(),
            partitions,
            configs,
            assignments,
            incarnation_id: format!("{:016x}", random_u64()),
            topic_id,
        }
    }
}

/// A change that was applied, as sent to subscribers (the per-core copies).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
// `Batch` makes the type recursive; rkyv needs the bounds spelled out.
#[rkyv(serialize_bounds(
    __S: rkyv::ser::Writer + rkyv::ser::Allocator,
    __S::Error: rkyv::rancor::Source,
))]
#[rkyv(deserialize_bounds(__D::Error: rkyv::rancor::Source))]
#[rkyv(bytecheck(bounds(
    __C: rkyv::validation::ArchiveContext,
    __C::Error: rkyv::rancor::Source,
)))]
pub enum Change {
    TopicCreated {
        topic: TopicMeta,
        assignments: Vec<Assignment>,
    },
    TopicDeleted {
        name: String,
        incarnation_id: String,
    },
    PartitionsAdded {
        name: String,
        new_total: u32,
        /// Assignments of the new partitions, starting at partition `new_total - len`.
        assignments: Vec<Assignment>,
    },
    ConfigsAltered {
        name: String,
        /// The complete config set after the change.
        configs: BTreeMap<String, String>,
    },
    AssignmentSet {
        name: String,
        partition: u32,
        assignment: Assignment,
    },
    ChildAttached {
        link: FanoutLink,
    },
    ChildDetached {
        parent: String,
        child: String,
        epoch: String,
    },
    BrokerRegistered {
        broker: Box<BrokerRegistration>,
    },
    /// A heartbeat was applied; `unfenced`: the node was fenced until now.
    BrokerHeartbeat {
        node_id: u64,
        incarnation: u64,
        unfenced: bool,
    },
    BrokerFenced {
        node_id: u64,
    },
    ClusterIdSet {
        id: String,
    },
    /// ACLs added and removed by one command.
    AclsChanged {
        added: Box<Vec<AclBinding>>,
        removed: Box<Vec<AclBinding>>,
    },
    BrokerListenersSet {
        node_id: u64,
        listeners: Box<Vec<ListenerEndpoint>>,
    },
    /// An entity's quotas after an AlterClientQuota (`values` empty: none left).
    ClientQuotaSet {
        quota: Box<ClientQuota>,
    },
    /// `user`'s credentials after a SCRAM change (none left: the user is gone).
    ScramUserChanged {
        user: String,
        credentials: Box<UserCredentials>,
    },
    /// Producer ids `first .. first + PRODUCER_ID_BLOCK_SIZE` belong to `node_id`'s start.
    ProducerIdsAllocated {
        node_id: u64,
        first: i64,
    },
    /// The node installed a snapshot from the leader: replace the whole copy.
    SnapshotInstalled {
        state: Box<MetaState>,
    },
    /// Several commands were proposed together (group commit) as one raft log entry and
    /// applied in this order; the changes of the commands that were not refused. Only sent to
    /// subscribers when an entry applied more than one change (a single change is sent as is),
    /// so that every [`AppliedChange`] still has its own `log_index`. Never nested, never holds
    /// `SnapshotInstalled`.
    Batch(#[rkyv(omit_bounds)] Vec<Change>),
    /// Barrier group `def.name` was created or its definition replaced (`def` as stored:
    /// topics sorted, each once).
    BarrierGroupDefined {
        def: BarrierGroupDef,
    },
    /// Barrier group `name` was deleted.
    BarrierGroupDeleted {
        name: String,
    },
    /// Replicated partitions' replicas, ISR, leader and epochs (issue #18) from
    /// `first_partition` on; the leaders' places in `assignments` follow.
    ReplicasSet {
        name: String,
        first_partition: u32,
        replicas: Vec<PartitionReplicas>,
    },
}

/// One applied change, with the raft log index it was applied at. Subscribers receive these in
/// strictly increasing `log_index` order.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct AppliedChange {
    pub log_index: u64,
    pub change: Change,
}

/// The payload of one normal raft log entry: the commands proposed together (group commit: the
/// writes that queued up while the previous proposal was being made durable). They are applied
/// in order, each on its own (a refused one leaves the state untouched and does not affect the
/// others); the entry's response has one [`ApplyOutcome`] per command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    pub commands: Vec<Command>,
}

/// The result of applying one command.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum ApplyOutcome {
    Applied(AppliedChange),
    Refused(Refusal),
    /// Blank and membership entries.
    NoOp,
}

/// A deterministic refusal of a command by the state machine.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("topic '{name}' already exists")]
    TopicAlreadyExists { name: String },
    #[error("unknown topic or partition: '{name}' partition {partition:?}")]
    UnknownTopicOrPartition {
        name: String,
        partition: Option<u32>,
    },
    #[error("invalid partitions for '{name}': {reason}")]
    InvalidPartitions { name: String, reason: String },
    #[error("invalid config for '{name}': {reason}")]
    InvalidConfig { name: String, reason: String },
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopic { name: String, reason: String },
    #[error("invalid assignment for '{name}': {reason}")]
    InvalidAssignment { name: String, reason: String },
    #[error("fan-out refused for child '{child}': {reason}")]
    InvalidFanout { child: String, reason: String },
    #[error("broker {node_id} refused: {reason}")]
    InvalidBroker { node_id: u64, reason: String },
    #[error("every producer-id block is handed out")]
    ProducerIdsExhausted,
    #[error("the cluster id is set already: {id}")]
    ClusterIdSet { id: String },
    #[error("invalid cluster id: {reason}")]
    InvalidClusterId { reason: String },
    #[error("invalid ACL: {reason}")]
    InvalidAcl { reason: String },
    #[error("invalid SCRAM credential for '{user}': {reason}")]
    InvalidScramCredential { user: String, reason: String },
    #[error("no {mechanism} credential for '{user}'")]
    NoScramCredential { user: String, mechanism: String },
    #[error("invalid client quota: {reason}")]
    InvalidQuota { reason: String },
    #[error("invalid barrier group '{name}': {reason}")]
    InvalidBarrierGroup { name: String, reason: String },
    #[error("unknown barrier group '{name}': no group of that name is defined (check the name; define it first)")]
    UnknownBarrierGroup { name: String },
    #[error("'{name}' partition {partition}: no reassignment is under way to cancel")]
    NoReassignmentInProgress { name: String, partition: u32 },
    #[error("'{name}' partition {partition}: no election needed: {reason}")]
    ElectionNotNeeded {
        name: String,
        partition: u32,
        reason: String,
    },
    #[error("'{name}' partition {partition}: the preferred leader cannot lead: {reason}")]
    PreferredLeaderNotAvailable {
        name: String,
        partition: u32,
        reason: String,
    },
    #[error("'{name}' partition {partition}: no replica can lead: {reason}")]
    EligibleLeadersNotAvailable {
        name: String,
        partition: u32,
        reason: String,
    },
}
