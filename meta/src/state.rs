//! The replicated metadata state machine: topics, partition assignments, fan-out links, barrier
//! groups, the broker registry and the security state (SCRAM users, ACLs, client quotas).
//! Everything here is deterministic: the same commands applied in the same order give the same
//! state on every node.

use std::collections::BTreeMap;

use crate::replication::UNCLEAN_LEADER_ELECTION_CONFIG;
pub use crate::replication::{Assignment, PartitionReplicas};
use rkyv::{Archive, Deserialize, Serialize};

/// Version of the [`MetaState`] layout (stored in snapshots). 2: the fan-out section holds links;
/// 3: the broker registry ([`MetaState::brokers`]); 4: SCRAM users, listeners, ACLs; 5: client
/// quotas ([`MetaState::client_quotas`]); 6: barrier group definitions
/// ([`BarrierGroups::groups`], barrier section version 2); 7: replicated partitions
/// ([`MetaState::replicas`]); 8: reassignments ([`PartitionReplicas::adding`] and
/// `removing`). Older snapshots are still read (see `sm::decode_snapshot`) and migrated.
pub const STATE_VERSION: u32 = 8;
/// Version of the fan-out links section. 1: empty; 2: [`FanoutLinks::links`].
pub const FANOUT_SECTION_VERSION: u32 = 2;
/// Version of the barrier groups section. 1: empty ([`BarrierSectionV1`]); 2:
/// [`BarrierGroups::groups`].
pub const BARRIER_SECTION_VERSION: u32 = 2;
/// Kafka's topic name limit.
pub const MAX_TOPIC_NAME_BYTES: usize = 249;
/// Upper bound on partitions of one topic.
pub const MAX_PARTITIONS_PER_TOPIC: u32 = 100_000;
/// Upper bound on config entries of one topic.
pub const MAX_CONFIG_ENTRIES_PER_TOPIC: usize = 1_024;
/// Upper bound on the length of one config key or value.
pub const MAX_CONFIG_ENTRY_BYTES: usize = 64 * 1024;
/// Length of an incarnation id in hex characters.
pub const INCARNATION_ID_HEX_CHARS: usize = 16;
/// Length of a fan-out attach epoch in hex characters (8 random bytes).
pub const FANOUT_EPOCH_HEX_CHARS: usize = 16;
/// At most this many children per parent topic (seed 000).
pub const MAX_FANOUT_CHILDREN_PER_PARENT: usize = 108;
/// Longest fan-out delay: one year, in milliseconds.
pub const MAX_FANOUT_DELAY_MS: u64 = 365 * 24 * 3_600 * 1_000;
/// A delay child's parent keeps its records at least `delay + this` (one hour), in milliseconds.
pub const FANOUT_RETENTION_MARGIN_MS: u64 = 3_600 * 1_000;
/// Longest advertised host name of a broker (DNS allows 253).
pub const MAX_BROKER_HOST_BYTES: usize = 255;
/// Longest rack id of a broker.
pub const MAX_BROKER_RACK_BYTES: usize = 255;
/// Most cores one broker registers (the core-direct broker id stride).
pub const MAX_BROKER_CORES: u32 = 1_000;
/// Producer ids in the block one start of a node takes (2^32: never used up by one process).
pub const PRODUCER_ID_BLOCK_SIZE: u64 = 1 << 32;
/// Blocks there are: producer ids stay below 2^62 (positive i64, far from overflow).
pub const MAX_PRODUCER_ID_BLOCKS: u64 = 1 << 30;
/// Longest cluster id.
pub const MAX_CLUSTER_ID_BYTES: usize = 64;
/// Most brokers in the registry.
pub const MAX_BROKERS: usize = 1_024;
/// The topic config holding a partition log's time retention.
pub const RETENTION_MS_CONFIG: &str = "retention.ms";

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    /// 16 lowercase hex characters; new on every create of this name.
    pub incarnation_id: String,
    /// Kafka topic UUID.
    pub topic_id: [u8; 16],
    pub partitions: u32,
    pub configs: BTreeMap<String, String>,
}

/// One fan-out attachment: every record committed to `parent` at or after `attach_offsets[p]`
/// in partition `p` is copied into `child` (seed 000).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FanoutLink {
    pub parent: String,
    pub child: String,
    /// 0 for a normal child; otherwise records are copied once `commit time + delay_ms` passed.
    /// Immutable for the life of the attachment.
    pub delay_ms: u64,
    /// [`FANOUT_EPOCH_HEX_CHARS`] lowercase hex characters, new on every attach; a cursor offset
    /// file from another epoch is never resumed.
    pub epoch: String,
    /// The parent's high watermark of each partition when the link was made (index = parent
    /// partition); partitions added to the parent later start at 0. No backfill below these.
    pub attach_offsets: Vec<u64>,
}

/// Fan-out links (seed 000), keyed by child topic (one parent per child).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FanoutLinks {
    pub section_version: u32,
    pub links: BTreeMap<String, FanoutLink>,
}

impl FanoutLinks {
    /// The link whose child is `child`.
    pub fn of_child(&self, child: &str) -> Option<&FanoutLink> {
        self.links.get(child)
    }

    /// The links whose parent is `parent`, ordered by child name.
    pub fn children_of<'a>(&'a self, parent: &'a str) -> impl Iterator<Item = &'a FanoutLink> {
        self.links.values().filter(move |l| l.parent == parent)
    }

    /// Whether `topic` is the parent of some link.
    pub fn is_parent(&self, topic: &str) -> bool {
        self.links.values().any(|l| l.parent == topic)
    }

    /// The longest delay among `parent`'s children (0 when none has a delay).
    pub fn max_child_delay_ms(&self, parent: &str) -> u64 {
        self.children_of(parent)
            .map(|l| l.delay_ms)
            .max()
            .unwrap_or(0)
    }

    /// Removes every link `topic` takes part in (as parent or child), as on topic deletion.
    fn forget_topic(&mut self, topic: &str) {
        self.links
            .retain(|child, l| child != topic && l.parent != topic);
    }

    /// New parent partitions start copying at offset 0 (they are empty when created).
    fn parent_grew(&mut self, parent: &str, new_total: u32) {
        for l in self.links.values_mut().filter(|l| l.parent == parent) {
            l.attach_offsets.resize(new_total as usize, 0);
        }
    }
}

/// The retention floor of a parent with a child delayed by `delay_ms`: `delay + 1 h`. `None` for
/// a child without delay (no floor).
pub fn fanout_retention_floor_ms(delay_ms: u64) -> Option<u64> {
    (delay_ms > 0).then(|| delay_ms.saturating_add(FANOUT_RETENTION_MARGIN_MS))
}

/// Whether an explicit `retention.ms` value keeps records at least `floor_ms` (`-1` = forever).
/// A value that does not parse is left to the config validation (treated as satisfying).
pub fn retention_satisfies(retention_ms: &str, floor_ms: u64) -> bool {
    match retention_ms.trim().parse::<i64>() {
        Ok(v) if v < 0 => true,
        Ok(v) => v as u64 >= floor_ms,
        Err(_) => true,
    }
}

/// One broker node as Kafka clients reach it (issue #17), registered by the node at each start.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub node_id: u64,
    /// The advertised host and port of the node's shared Kafka listener.
    pub host: String,
    pub port: u16,
    /// Core-direct: each core's advertised port (core c is broker `node_id × 1000 + c`);
    /// empty when core-direct is off (the node is broker `node_id`).
    pub core_ports: Vec<u16>,
    pub cores: u32,
    pub rack: Option<String>,
    /// Random, new at every start of the node's process: a heartbeat or fence meant for an
    /// earlier start is refused.
    pub incarnation: u64,
    /// Missed its session (no heartbeat within the session timeout): not listed to clients,
    /// its partitions unavailable until it heartbeats again.
    pub fenced: bool,
}

impl BrokerRegistration {
    fn validate(&self) -> Result<(), Refusal> {
        let bad = |reason: String| {
            Err(Refusal::InvalidBroker {
                node_id: self.node_id,
                reason,
            })
        };
        if self.host.is_empty() || self.host.len() > MAX_BROKER_HOST_BYTES {
            return bad(format!("host must be 1 to {MAX_BROKER_HOST_BYTES} bytes"));
        }
        if self.cores == 0 || self.cores > MAX_BROKER_CORES {
            return bad(format!("cores must be 1 to {MAX_BROKER_CORES}"));
        }
        if !self.core_ports.is_empty() && self.core_ports.len() != self.cores as usize {
            return bad(format!(
                "{} core ports for {} cores",
                self.core_ports.len(),
                self.cores
            ));
        }
        if self
            .rack
            .as_ref()
            .is_some_and(|r| r.len() > MAX_BROKER_RACK_BYTES)
        {
            return bad(format!("rack longer than {MAX_BROKER_RACK_BYTES} bytes"));
        }
        Ok(())
    }
}

/// The most brokers that may be fenced at once among `registered`: fewer than half, so a
/// fencing leader that lost touch with the others can never fence a quorum (the breaker of
/// issue #17). One broker alone is never fenced.
pub fn max_fenced_brokers(registered: usize) -> usize {
    registered.saturating_sub(1) / 2
}

/// The barrier section of state versions 1 to 5 (section version 1: versioned and empty),
/// kept for the old snapshot layouts (`sm::v1` .. `sm::v5`) that are still read and migrated.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BarrierSectionV1 {
    pub section_version: u32,
}

/// The most barrier groups the metastore holds.
pub const MAX_BARRIER_GROUPS: usize = 100;
/// The most topics in one barrier group.
pub const MAX_TOPICS_PER_BARRIER_GROUP: usize = 100;
/// The shortest interval between two cuts of a group: one second, in milliseconds.
pub const MIN_BARRIER_INTERVAL_MS: u64 = 1_000;
/// The longest interval between two cuts of a group: one week, in milliseconds.
pub const MAX_BARRIER_INTERVAL_MS: u64 = 7 * 24 * 3_600_000;
/// The `interval_ms` of a group that is never triggered by itself (only by TriggerBarrier):
/// KFC-4's interval -1.
pub const BARRIER_INTERVAL_OFF_MS: u64 = 0;
/// The most cuts a group keeps.
pub const MAX_RETAINED_CUTS: u32 = 10_000;
/// The longest barrier group name (the Kafka topic name limit).
pub const MAX_BARRIER_GROUP_NAME_BYTES: usize = 249;

/// Whether `interval_ms` is a barrier group's: in range, or [`BARRIER_INTERVAL_OFF_MS`].
pub fn valid_barrier_interval(interval_ms: u64) -> bool {
    interval_ms == BARRIER_INTERVAL_OFF_MS
        || (MIN_BARRIER_INTERVAL_MS..=MAX_BARRIER_INTERVAL_MS).contains(&interval_ms)
}

/// One barrier group (seed 003 "barrier cuts"): every `interval_ms` a consistent cut is taken
/// across the partitions of `topics`; the newest `retained_cuts` cuts are kept.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BarrierGroupDef {
    /// 1 to [`MAX_BARRIER_GROUP_NAME_BYTES`] bytes of `[a-zA-Z0-9._-]`, not `.` or `..` (the
    /// Kafka topic name rule).
    pub name: String,
    /// Existing, non-internal topics (no `__` prefix), sorted, each once, at most
    /// [`MAX_TOPICS_PER_BARRIER_GROUP`]. A define names at least one; a group whose topics were
    /// all deleted since stays defined with none (its cuts then cover nothing) until it is
    /// redefined or deleted.
    pub topics: Vec<String>,
    /// [`MIN_BARRIER_INTERVAL_MS`] ..= [`MAX_BARRIER_INTERVAL_MS`], or
    /// [`BARRIER_INTERVAL_OFF_MS`] for a group with no periodic injection.
    pub interval_ms: u64,
    /// 1 ..= [`MAX_RETAINED_CUTS`].
    pub retained_cuts: u32,
}

/// Barrier groups (seed 003), keyed by group name (section version
/// [`BARRIER_SECTION_VERSION`]).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BarrierGroups {
    pub section_version: u32,
    pub groups: BTreeMap<String, BarrierGroupDef>,
}

impl BarrierGroups {
    /// The group named `name`.
    pub fn get(&self, name: &str) -> Option<&BarrierGroupDef> {
        self.groups.get(name)
    }

    /// The groups `topic` belongs to, ordered by group name.
    pub fn groups_of_topic<'a>(
        &'a self,
        topic: &'a str,
    ) -> impl Iterator<Item = &'a BarrierGroupDef> {
        self.groups
            .values()
            .filter(move |g| g.topics.binary_search_by(|t| t.as_str().cmp(topic)).is_ok())
    }

    /// Takes `topic` out of every group, as on topic deletion. A group left without topics
    /// stays defined (with none).
    fn forget_topic(&mut self, topic: &str) {
        for g in self.groups.values_mut() {
            g.topics.retain(|t| t != topic);
        }
    }
}

/// A SCRAM mechanism (KIP-84) with Kafka's wire numbers.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256 (Kafka's mechanism 1).
    Sha256,
    /// SCRAM-SHA-512 (Kafka's mechanism 2).
    Sha512,
}

impl ScramMechanism {
    pub fn kafka_code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }
    pub fn from_kafka_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }
    pub fn sasl_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }
}

/// A user's SCRAM credential for one mechanism, salted (RFC 5802): never the password.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

/// One user's SCRAM credentials (issue #19), by mechanism.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct UserCredentials {
    pub sha256: Option<ScramCredential>,
    pub sha512: Option<ScramCredential>,
}

impl UserCredentials {
    pub fn get(&self, m: ScramMechanism) -> Option<&ScramCredential> {
        match m {
            ScramMechanism::Sha256 => self.sha256.as_ref(),
            ScramMechanism::Sha512 => self.sha512.as_ref(),
        }
    }
    fn slot(&mut self, m: ScramMechanism) -> &mut Option<ScramCredential> {
        match m {
            ScramMechanism::Sha256 => &mut self.sha256,
            ScramMechanism::Sha512 => &mut self.sha512,
        }
    }
    fn is_empty(&self) -> bool {
        self.sha256.is_none() && self.sha512.is_none()
    }
}

/// A listener a node serves besides its primary one (issue #19), as clients on it reach the
/// node: a client's Metadata names every broker by the listener it came in on.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ListenerEndpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// The most extra listeners one node registers.
pub const MAX_LISTENERS_PER_BROKER: usize = 16;
/// The longest listener name and host, in bytes.
pub const MAX_LISTENER_FIELD_BYTES: usize = 255;

/// One ACL (Kafka's ACL binding, KIP-140), with Kafka's wire codes: resource type (2 topic,
/// 3 group, 4 cluster, 5 transactional id), pattern type (3 literal, 4 prefixed), operation
/// (2 all, 3 read, ...), permission (2 deny, 3 allow). Checked when created
/// (`net::acl`); the metastore keeps each binding once.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// The most ACLs the metastore holds.
pub const MAX_ACLS: usize = 100_000;
/// The longest resource name, principal or host of an ACL, in bytes.
pub const MAX_ACL_FIELD_BYTES: usize = 1_024;

/// The most SCRAM users the metastore holds.
pub const MAX_SCRAM_USERS: usize = 10_000;
/// The longest SCRAM user name, salt and key, in bytes.
pub const MAX_SCRAM_USER_BYTES: usize = 256;
pub const MAX_SCRAM_FIELD_BYTES: usize = 256;

/// One part of a client-quota entity (KIP-546): absent, the default (`<default>`, a null
/// name on the wire), or a name.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum QuotaPart {
    Absent,
    Default,
    Named(String),
}

/// What a client quota applies to: a user, a client id, or both (Kafka's entity types
/// `user` and `client-id`; at least one part is not absent).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct QuotaEntity {
    pub user: QuotaPart,
    pub client_id: QuotaPart,
}

/// The quota keys ringlog enforces (Kafka's names): bytes per second a producer sends,
/// bytes per second a consumer fetches, and percent of one core spent on a client's requests.
pub const QUOTA_KEYS: &[&str] = &[
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
];

/// One entity's quotas: key (one of [`QUOTA_KEYS`]) -> value, as `f64::to_bits` (the state
/// stays `Eq`).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ClientQuota {
    pub entity: QuotaEntity,
    pub values: BTreeMap<String, u64>,
}

impl ClientQuota {
    /// The value of `key`, if set.
    pub fn value(&self, key: &str) -> Option<f64> {
        self.values.get(key).map(|b| f64::from_bits(*b))
    }
}

/// The most client-quota entities the metastore holds.
pub const MAX_CLIENT_QUOTAS: usize = 10_000;
/// The longest user or client id a quota names, in bytes.
pub const MAX_QUOTA_NAME_BYTES: usize = 1_024;

/// The whole replicated metadata state.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct MetaState {
    pub version: u32,
    pub topics: BTreeMap<String, TopicMeta>,
    /// topic name -> assignment of each partition (index = partition number).
    pub assignments: BTreeMap<String, Vec<Assignment>>,
    pub fanout_links: FanoutLinks,
    /// Barrier group definitions (seed 003), by group name.
    pub barrier_groups: BarrierGroups,
    /// The broker registry (issue #17): node id -> registration.
    pub brokers: BTreeMap<u64, BrokerRegistration>,
    /// The Kafka cluster id every node reports, set once by the first node that starts.
    pub cluster_id: Option<String>,
    /// Producer-id blocks handed out so far: each start of a node takes the next one, so
    /// no two producers of the cluster ever share an id.
    pub producer_id_blocks: u64,
    /// SCRAM credentials by user (issue #19).
    pub scram_users: BTreeMap<String, UserCredentials>,
    /// The extra listeners of each node (issue #19), by node id.
    pub broker_listeners: BTreeMap<u64, Vec<ListenerEndpoint>>,
    /// Every ACL (issue #19), sorted, each once.
    pub acls: Vec<AclBinding>,
    /// Client quotas (issue #19), sorted by entity, each entity once, none empty.
    pub client_quotas: Vec<ClientQuota>,
    /// The replicated topics' partitions (issue #18): topic -> one entry per partition.
    /// A topic of replication factor 1 has none (its assignment is all there is).
    pub replicas: BTreeMap<String, Vec<PartitionReplicas>>,
}

impl Default for MetaState {
    fn default() -> Self {
        MetaState {
            version: STATE_VERSION,
            topics: BTreeMap::new(),
            assignments: BTreeMap::new(),
            fanout_links: FanoutLinks {
                section_version: FANOUT_SECTION_VERSION,
                links: BTreeMap::new(),
            },
            barrier_groups: BarrierGroups {
                section_version: BARRIER_SECTION_VERSION,
                groups: BTreeMap::new(),
            },
            brokers: BTreeMap::new(),
            cluster_id: None,
            producer_id_blocks: 0,
            scram_users: BTreeMap::new(),
            broker_listeners: BTreeMap::new(),
            acls: Vec::new(),
            client_quotas: Vec::new(),
            replicas: BTreeMap::new(),
        }
    }
}

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

fn validate_topic_name(name: &str) -> Result<(), Refusal> {
    let bad = |reason: &str| {
        Err(Refusal::InvalidTopic {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > MAX_TOPIC_NAME_BYTES {
        return bad("longer than MAX_TOPIC_NAME_BYTES");
    }
    match name_chars_problem(name) {
        Some(reason) => bad(reason),
        None => Ok(()),
    }
}

/// What breaks Kafka's topic name character rule in `name` (only `[a-zA-Z0-9._-]`, not `.` or
/// `..`); the length is checked by the caller.
fn name_chars_problem(name: &str) -> Option<&'static str> {
    if name == "." || name == ".." {
        return Some("'.' and '..' are not allowed");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Some("only [a-zA-Z0-9._-] allowed");
    }
    None
}

/// Whether `topic` is internal (Kafka's `__` prefix: `__consumer_offsets`, ...).
fn is_internal_topic(topic: &str) -> bool {
    topic.starts_with("__")
}

fn validate_configs<'a>(
    name: &str,
    current: usize,
    entries: impl Iterator<Item = (&'a String, &'a String)>,
) -> Result<(), Refusal> {
    for (k, v) in entries {
        if k.is_empty() || k.len() > MAX_CONFIG_ENTRY_BYTES || v.len() > MAX_CONFIG_ENTRY_BYTES {
            return Err(Refusal::InvalidConfig {
                name: name.to_string(),
                reason: format!("config key/value '{k}' empty or over MAX_CONFIG_ENTRY_BYTES"),
            });
        }
    }
    if current > MAX_CONFIG_ENTRIES_PER_TOPIC {
        return Err(Refusal::InvalidConfig {
            name: name.to_string(),
            reason: format!(
                "more than MAX_CONFIG_ENTRIES_PER_TOPIC ({MAX_CONFIG_ENTRIES_PER_TOPIC})"
            ),
        });
    }
    Ok(())
}

impl MetaState {
    pub fn topic(&self, name: &str) -> Option<&TopicMeta> {
        self.topics.get(name)
    }

    /// The definition of barrier group `name`.
    pub fn barrier_group(&self, name: &str) -> Option<&BarrierGroupDef> {
        self.barrier_groups.get(name)
    }

    pub fn assignment(&self, topic: &str, partition: u32) -> Option<Assignment> {
        self.assignments
            .get(topic)
            .and_then(|a| a.get(partition as usize))
            .copied()
    }

    /// Checks the structural invariants; used by tests and debug assertions.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.topics.len() != self.assignments.len() {
            return Err("topics and assignments disagree on the set of topics".into());
        }
        self.check_replicas()?;
        for (name, t) in &self.topics {
            if &t.name != name {
                return Err(format!("topic key '{name}' != name '{}'", t.name));
            }
            let a = self
                .assignments
                .get(name)
                .ok_or_else(|| format!("no assignments for '{name}'"))?;
            if a.len() != t.partitions as usize {
                return Err(format!(
                    "'{name}': {} assignments for {} partitions",
                    a.len(),
                    t.partitions
                ));
            }
            if t.incarnation_id.len() != INCARNATION_ID_HEX_CHARS {
                return Err(format!("'{name}': bad incarnation id"));
            }
        }
        for (child, l) in &self.fanout_links.links {
            if child != &l.child {
                return Err(format!("fan-out key '{child}' != child '{}'", l.child));
            }
            let parent = self
                .topics
                .get(&l.parent)
                .ok_or_else(|| format!("fan-out '{child}': unknown parent '{}'", l.parent))?;
            if !self.topics.contains_key(child) {
                return Err(format!("fan-out '{child}': unknown child"));
            }
            if l.attach_offsets.len() != parent.partitions as usize {
                return Err(format!(
                    "fan-out '{child}': {} attach offsets for {} parent partitions",
                    l.attach_offsets.len(),
                    parent.partitions
                ));
            }
            if l.epoch.len() != FANOUT_EPOCH_HEX_CHARS {
                return Err(format!("fan-out '{child}': bad epoch"));
            }
        }
        if self
            .client_quotas
            .windows(2)
            .any(|w| w[0].entity >= w[1].entity)
            || self.client_quotas.iter().any(|q| q.values.is_empty())
        {
            return Err("client quotas unsorted, repeated or empty".into());
        }
        self.check_barrier_invariants()
    }

    /// The barrier section's invariants: its version, at most [`MAX_BARRIER_GROUPS`], each
    /// keyed by its name, valid names, existing non-internal topics sorted and each once, the
    /// limits on topics, interval and retained cuts. (Topics may be empty: see
    /// [`BarrierGroupDef::topics`].)
    fn check_barrier_invariants(&self) -> Result<(), String> {
        let b = &self.barrier_groups;
        if b.section_version != BARRIER_SECTION_VERSION {
            return Err(format!(
                "barrier section version {} (expected {BARRIER_SECTION_VERSION})",
                b.section_version
            ));
        }
        if b.groups.len() > MAX_BARRIER_GROUPS {
            return Err(format!(
                "{} barrier groups, more than {MAX_BARRIER_GROUPS}",
                b.groups.len()
            ));
        }
        for (name, g) in &b.groups {
            if name != &g.name {
                return Err(format!("barrier group key '{name}' != name '{}'", g.name));
            }
            if name.is_empty()
                || name.len() > MAX_BARRIER_GROUP_NAME_BYTES
                || name_chars_problem(name).is_some()
            {
                return Err(format!("barrier group '{name}': bad name"));
            }
            if g.topics.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!(
                    "barrier group '{name}': topics unsorted or repeated"
                ));
            }
            if g.topics.len() > MAX_TOPICS_PER_BARRIER_GROUP {
                return Err(format!(
                    "barrier group '{name}': {} topics, more than {MAX_TOPICS_PER_BARRIER_GROUP}",
                    g.topics.len()
                ));
            }
            if let Some(t) = g
                .topics
                .iter()
                .find(|t| is_internal_topic(t) || !self.topics.contains_key(*t))
            {
                return Err(format!(
                    "barrier group '{name}': topic '{t}' is unknown or internal"
                ));
            }
            if !valid_barrier_interval(g.interval_ms) {
                return Err(format!(
                    "barrier group '{name}': interval {} ms out of range",
                    g.interval_ms
                ));
            }
            if !(1..=MAX_RETAINED_CUTS).contains(&g.retained_cuts) {
                return Err(format!(
                    "barrier group '{name}': {} retained cuts out of range",
                    g.retained_cuts
                ));
            }
        }
        Ok(())
    }

    /// `def` as it is stored (topics sorted, each once), checked against the define rules:
    /// a valid name, [`MIN_BARRIER_INTERVAL_MS`] ..= [`MAX_BARRIER_INTERVAL_MS`], 1 ..=
    /// [`MAX_RETAINED_CUTS`] retained cuts, 1 to [`MAX_TOPICS_PER_BARRIER_GROUP`] distinct
    /// topics that exist and are not internal, and no new group beyond
    /// [`MAX_BARRIER_GROUPS`] (replacing one is fine).
    fn checked_barrier_group(&self, def: &BarrierGroupDef) -> Result<BarrierGroupDef, Refusal> {
        let name = &def.name;
        let bad = |reason: String| {
            Err(Refusal::InvalidBarrierGroup {
                name: name.clone(),
                reason,
            })
        };
        if name.is_empty() {
            return bad(format!(
                "the name is empty: name the group with 1 to {MAX_BARRIER_GROUP_NAME_BYTES} bytes"
            ));
        }
        if name.len() > MAX_BARRIER_GROUP_NAME_BYTES {
            return bad(format!(
                "the name is {} bytes, longer than MAX_BARRIER_GROUP_NAME_BYTES \
                 ({MAX_BARRIER_GROUP_NAME_BYTES}): use a shorter name",
                name.len()
            ));
        }
        if let Some(problem) = name_chars_problem(name) {
            return bad(format!(
                "{problem} in a group name (the Kafka topic name rule): rename the group"
            ));
        }
        if !valid_barrier_interval(def.interval_ms) {
            return bad(format!(
                "interval_ms {} is outside {MIN_BARRIER_INTERVAL_MS}..={MAX_BARRIER_INTERVAL_MS} \
                 (1 s to 7 days, MIN_BARRIER_INTERVAL_MS..=MAX_BARRIER_INTERVAL_MS): pick an \
                 interval in that range, or none (no periodic cuts)",
                def.interval_ms
            ));
        }
        if !(1..=MAX_RETAINED_CUTS).contains(&def.retained_cuts) {
            return bad(format!(
                "retained_cuts {} is outside 1..={MAX_RETAINED_CUTS} (MAX_RETAINED_CUTS): keep \
                 1 to {MAX_RETAINED_CUTS} cuts",
                def.retained_cuts
            ));
        }
        let mut topics = def.topics.clone();
        topics.sort();
        topics.dedup();
        if topics.is_empty() {
            return bad(format!(
                "no topics: name 1 to {MAX_TOPICS_PER_BARRIER_GROUP} existing topics"
            ));
        }
        if topics.len() > MAX_TOPICS_PER_BARRIER_GROUP {
            return bad(format!(
                "{} distinct topics, more than MAX_TOPICS_PER_BARRIER_GROUP \
                 ({MAX_TOPICS_PER_BARRIER_GROUP}): split them over several groups",
                topics.len()
            ));
        }
        for t in &topics {
            if is_internal_topic(t) {
                return bad(format!(
                    "topic '{t}' is internal (a '__' prefix) and takes no part in barrier \
                     cuts: leave it out"
                ));
            }
            if !self.topics.contains_key(t) {
                return bad(format!(
                    "topic '{t}' does not exist: create it first or leave it out"
                ));
            }
        }
        if !self.barrier_groups.groups.contains_key(name)
            && self.barrier_groups.groups.len() >= MAX_BARRIER_GROUPS
        {
            return bad(format!(
                "the metastore holds {MAX_BARRIER_GROUPS} barrier groups at most \
                 (MAX_BARRIER_GROUPS): delete one first, or redefine an existing group"
            ));
        }
        Ok(BarrierGroupDef {
            name: name.clone(),
            topics,
            interval_ms: def.interval_ms,
            retained_cuts: def.retained_cuts,
        })
    }

    /// Puts `quota` in its place in the sorted `client_quotas` (no values: takes its entity
    /// out).
    fn set_client_quota(&mut self, quota: &ClientQuota) {
        let at = self
            .client_quotas
            .binary_search_by(|q| q.entity.cmp(&quota.entity));
        match at {
            Ok(i) if quota.values.is_empty() => {
                self.client_quotas.remove(i);
            }
            Ok(i) => self.client_quotas[i] = quota.clone(),
            Err(_) if quota.values.is_empty() => {}
            Err(i) => self.client_quotas.insert(i, quota.clone()),
        }
    }

    /// The quotas of `alter.entity` after `alter`, checked (names, keys, finite positive
    /// values, [`MAX_CLIENT_QUOTAS`]).
    fn altered_quota(&self, alter: &QuotaAlteration) -> Result<ClientQuota, Refusal> {
        let bad = |reason: String| Err(Refusal::InvalidQuota { reason });
        let e = &alter.entity;
        if e.user == QuotaPart::Absent && e.client_id == QuotaPart::Absent {
            return bad("an entity names a user, a client id or both".into());
        }
        for p in [&e.user, &e.client_id] {
            if let QuotaPart::Named(n) = p {
                if n.is_empty() || n.len() > MAX_QUOTA_NAME_BYTES {
                    return bad(format!("a name is 1 to {MAX_QUOTA_NAME_BYTES} bytes"));
                }
            }
        }
        for k in alter.set.keys().chain(alter.remove.iter()) {
            if !QUOTA_KEYS.contains(&k.as_str()) {
                return bad(format!("unknown quota key '{k}' (known: {QUOTA_KEYS:?})"));
            }
        }
        if let Some((k, v)) = alter
            .set
            .iter()
            .find(|(_, v)| !(f64::from_bits(**v).is_finite() && f64::from_bits(**v) > 0.0))
        {
            return bad(format!(
                "'{k}' = {}: a quota is a finite number above 0",
                f64::from_bits(*v)
            ));
        }
        let existing = self
            .client_quotas
            .binary_search_by(|q| q.entity.cmp(e))
            .ok()
            .map(|i| &self.client_quotas[i]);
        let mut values = existing.map(|q| q.values.clone()).unwrap_or_default();
        for k in &alter.remove {
            values.remove(k);
        }
        values.extend(alter.set.iter().map(|(k, v)| (k.clone(), *v)));
        if existing.is_none() && !values.is_empty() && self.client_quotas.len() >= MAX_CLIENT_QUOTAS
        {
            return bad(format!(
                "the metastore holds {MAX_CLIENT_QUOTAS} quota entities at most"
            ));
        }
        Ok(ClientQuota {
            entity: e.clone(),
            values,
        })
    }

    fn create_topic_with(
        &mut self,
        name: &str,
        partitions: u32,
        configs: &BTreeMap<String, String>,
        replicas: &[Vec<Assignment>],
        incarnation_id: &str,
        topic_id: &[u8; 16],
    ) -> Result<Change, Refusal> {
        validate_topic_name(name)?;
        if self.topics.contains_key(name) {
            return Err(Refusal::TopicAlreadyExists { name: name.into() });
        }
        if partitions == 0 || partitions > MAX_PARTITIONS_PER_TOPIC {
            return Err(Refusal::InvalidPartitions {
                name: name.into(),
                reason: format!(
                    "partition count {partitions} must be in 1..={MAX_PARTITIONS_PER_TOPIC}"
                ),
            });
        }
        if replicas.len() != partitions as usize {
            return Err(Refusal::InvalidAssignment {
                name: name.into(),
                reason: format!("{} assignments for {partitions} partitions", replicas.len()),
            });
        }
        let rf = validate_placement(name, replicas)?;
        validate_configs(name, configs.len(), configs.iter())?;
        if incarnation_id.len() != INCARNATION_ID_HEX_CHARS
            || !incarnation_id.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(Refusal::InvalidTopic {
                name: name.into(),
                reason: format!("incarnation id '{incarnation_id}' is not 16 hex chars"),
            });
        }
        let topic = TopicMeta {
            name: name.into(),
            incarnation_id: incarnation_id.into(),
            topic_id: *topic_id,
            partitions,
            configs: configs.clone(),
        };
        let assignments: Vec<Assignment> = replicas.iter().map(|r| r[0]).collect();
        self.topics.insert(name.into(), topic.clone());
        self.assignments.insert(name.into(), assignments.clone());
        let created = Change::TopicCreated { topic, assignments };
        if rf == 1 {
            return Ok(created);
        }
        let sets: Vec<PartitionReplicas> = replicas
            .iter()
            .map(|r| PartitionReplicas::new(r.clone()))
            .collect();
        assert!(
            self.set_replicas(name, 0, &sets),
            "the topic was just created"
        );
        Ok(Change::Batch(vec![
            created,
            Change::ReplicasSet {
                name: name.into(),
                first_partition: 0,
                replicas: sets,
            },
        ]))
    }

    fn add_partitions_with(
        &mut self,
        name: &str,
        new_total: u32,
        replicas: &[Vec<Assignment>],
    ) -> Result<Change, Refusal> {
        let rf = self.replication_factor(name);
        // Replica state, as the topic's other partitions have it (a replicated topic's
        // partitions may differ in size after reassignments: the first's is the topic's).
        let replicated = self.replicas.contains_key(name);
        let t = self
            .topics
            .get_mut(name)
            .ok_or_else(|| Refusal::UnknownTopicOrPartition {
                name: name.into(),
                partition: None,
            })?;
        if new_total <= t.partitions || new_total > MAX_PARTITIONS_PER_TOPIC {
            return Err(Refusal::InvalidPartitions {
                name: name.into(),
                reason: format!(
                    "new total {new_total} must be above the current {} and at most {MAX_PARTITIONS_PER_TOPIC}",
                    t.partitions
                ),
            });
        }
        let added = (new_total - t.partitions) as usize;
        if replicas.len() != added {
            return Err(Refusal::InvalidAssignment {
                name: name.into(),
                reason: format!("{} assignments for {added} new partitions", replicas.len()),
            });
        }
        let new_rf = validate_placement(name, replicas)?;
        if new_rf != rf {
            return Err(Refusal::InvalidAssignment {
                name: name.into(),
                reason: format!(
                    "the new partitions have {new_rf} replicas, the topic's replication factor is {rf}"
                ),
            });
        }
        let first = t.partitions;
        t.partitions = new_total;
        let assignments: Vec<Assignment> = replicas.iter().map(|r| r[0]).collect();
        let a = self
            .assignments
            .get_mut(name)
            .expect("invariant: every topic has an assignments entry");
        a.extend_from_slice(&assignments);
        self.fanout_links.parent_grew(name, new_total);
        let added = Change::PartitionsAdded {
            name: name.into(),
            new_total,
            assignments,
        };
        if !replicated {
            return Ok(added);
        }
        let sets: Vec<PartitionReplicas> = replicas
            .iter()
            .map(|r| PartitionReplicas::new(r.clone()))
            .collect();
        assert!(
            self.set_replicas(name, first, &sets),
            "the partitions were just added"
        );
        Ok(Change::Batch(vec![
            added,
            Change::ReplicasSet {
                name: name.into(),
                first_partition: first,
                replicas: sets,
            },
        ]))
    }

    /// Applies `cmd` at raft log index `log_index`. A refusal leaves the state untouched.
    pub fn apply(&mut self, cmd: &Command) -> Result<Change, Refusal> {
        let change = self.apply_inner(cmd)?;
        debug_assert_eq!(self.check_invariants(), Ok(()));
        Ok(change)
    }

    fn apply_inner(&mut self, cmd: &Command) -> Result<Change, Refusal> {
        match cmd {
            Command::CreateTopic {
                name,
                partitions,
                configs,
                assignments,
                incarnation_id,
                topic_id,
            } => {
                let replicas: Vec<Vec<Assignment>> = assignments.iter().map(|a| vec![*a]).collect();
                self.create_topic_with(
                    name,
                    *partitions,
                    configs,
                    &replicas,
                    incarnation_id,
                    topic_id,
                )
            }
            Command::CreateReplicatedTopic { topic } => self.create_topic_with(
                &topic.name,
                topic.partitions,
                &topic.configs,
                &topic.replicas,
                &topic.incarnation_id,
                &topic.topic_id,
            ),
            Command::DeleteTopic { name } => {
                let t =
                    self.topics
                        .remove(name)
                        .ok_or_else(|| Refusal::UnknownTopicOrPartition {
                            name: name.clone(),
                            partition: None,
                        })?;
                self.assignments.remove(name);
                self.replicas.remove(name);
                self.fanout_links.forget_topic(name);
                self.barrier_groups.forget_topic(name);
                Ok(Change::TopicDeleted {
                    name: name.clone(),
                    incarnation_id: t.incarnation_id,
                })
            }
            Command::AddPartitions {
                name,
                new_total,
                assignments,
            } => {
                let replicas: Vec<Vec<Assignment>> = assignments.iter().map(|a| vec![*a]).collect();
                self.add_partitions_with(name, *new_total, &replicas)
            }
            Command::AddReplicatedPartitions {
                name,
                new_total,
                replicas,
            } => self.add_partitions_with(name, *new_total, replicas),
            Command::AlterIsr {
                name,
                partition,
                leader_epoch,
                partition_epoch,
                isr,
            } => self.alter_isr(name, *partition, *leader_epoch, *partition_epoch, isr),
            Command::ReassignReplicas {
                name,
                partition,
                target,
            } => self.reassign(name, *partition, target.as_deref()),
            Command::ElectLeader {
                name,
                partition,
                unclean,
            } => self.elect_leader(name, *partition, *unclean),
            Command::MoveReplicaCore {
                name,
                partition,
                node_id,
                core_index,
            } => self.move_replica_core(name, *partition, *node_id, *core_index),
            Command::AlterConfigs { name, set, remove } => {
                let t =
                    self.topics
                        .get_mut(name)
                        .ok_or_else(|| Refusal::UnknownTopicOrPartition {
                            name: name.clone(),
                            partition: None,
                        })?;
                let mut configs = t.configs.clone();
                for k in remove {
                    configs.remove(k);
                }
                for (k, v) in set {
                    configs.insert(k.clone(), v.clone());
                }
                validate_configs(name, configs.len(), set.iter())?;
                let floor = fanout_retention_floor_ms(self.fanout_links.max_child_delay_ms(name));
                if let (Some(floor), Some(r)) = (floor, configs.get(RETENTION_MS_CONFIG)) {
                    if !retention_satisfies(r, floor) {
                        return Err(Refusal::InvalidConfig {
                            name: name.clone(),
                            reason: format!(
                                "{RETENTION_MS_CONFIG}={r} is below {floor} ms, the retention \
                                 floor (delay + 1 h) of its delayed fan-out children"
                            ),
                        });
                    }
                }
                let t = self
                    .topics
                    .get_mut(name)
                    .expect("checked above: the topic exists");
                t.configs = configs.clone();
                Ok(Change::ConfigsAltered {
                    name: name.clone(),
                    configs,
                })
            }
            Command::SetAssignment {
                name,
                partition,
                assignment,
            } => {
                let unknown = || Refusal::UnknownTopicOrPartition {
                    name: name.clone(),
                    partition: Some(*partition),
                };
                if self.replica_set(name, *partition).is_some() {
                    return Err(Refusal::InvalidAssignment {
                        name: name.clone(),
                        reason: format!(
                            "partition {partition} is replicated: its replicas move by a reassignment (ReassignReplicas)"
                        ),
                    });
                }
                let a = self.assignments.get_mut(name).ok_or_else(unknown)?;
                let slot = a.get_mut(*partition as usize).ok_or_else(unknown)?;
                *slot = *assignment;
                Ok(Change::AssignmentSet {
                    name: name.clone(),
                    partition: *partition,
                    assignment: *assignment,
                })
            }
            Command::AttachChild {
                parent,
                child,
                delay_ms,
                epoch,
                attach_offsets,
            } => {
                self.check_attach(parent, child, *delay_ms, epoch, attach_offsets)?;
                let link = FanoutLink {
                    parent: parent.clone(),
                    child: child.clone(),
                    delay_ms: *delay_ms,
                    epoch: epoch.clone(),
                    attach_offsets: attach_offsets.clone(),
                };
                self.fanout_links.links.insert(child.clone(), link.clone());
                Ok(Change::ChildAttached { link })
            }
            Command::RegisterBroker { broker } => {
                broker.validate()?;
                if !self.brokers.contains_key(&broker.node_id) && self.brokers.len() >= MAX_BROKERS
                {
                    return Err(Refusal::InvalidBroker {
                        node_id: broker.node_id,
                        reason: format!("the registry holds {MAX_BROKERS} brokers (MAX_BROKERS)"),
                    });
                }
                // A new start of a node that was registered: its replicas are of a process
                // that is gone (issue #18). They lose what they led and leave the ISR as at
                // a fence, then rejoin once caught up; a leaderless partition whose ISR
                // still holds the node is led by it again.
                let restarted = self
                    .brokers
                    .get(&broker.node_id)
                    .is_some_and(|old| old.incarnation != broker.incarnation);
                let mut b = (**broker).clone();
                b.fenced = true;
                self.brokers.insert(b.node_id, b.clone());
                let mut elections = if restarted {
                    self.reelect(broker.node_id, true)
                } else {
                    Vec::new()
                };
                b.fenced = false;
                self.brokers.insert(b.node_id, b.clone());
                elections.extend(self.reelect(broker.node_id, false));
                let registered = Change::BrokerRegistered {
                    broker: Box::new(b),
                };
                Ok(with_elections(registered, elections))
            }
            Command::BrokerHeartbeat {
                node_id,
                incarnation,
            } => {
                let b = self.registered(*node_id, *incarnation)?;
                let unfenced = std::mem::replace(&mut b.fenced, false);
                let beat = Change::BrokerHeartbeat {
                    node_id: *node_id,
                    incarnation: *incarnation,
                    unfenced,
                };
                let elections = if unfenced {
                    self.reelect(*node_id, false)
                } else {
                    Vec::new()
                };
                Ok(with_elections(beat, elections))
            }
            Command::FenceBroker {
                node_id,
                incarnation,
            } => {
                let registered = self.brokers.len();
                let fenced = self.brokers.values().filter(|b| b.fenced).count();
                let b = self.registered(*node_id, *incarnation)?;
                if b.fenced {
                    return Err(Refusal::InvalidBroker {
                        node_id: *node_id,
                        reason: "already fenced".into(),
                    });
                }
                if fenced + 1 > max_fenced_brokers(registered) {
                    return Err(Refusal::InvalidBroker {
                        node_id: *node_id,
                        reason: format!(
                            "{fenced} of {registered} brokers are fenced already: fencing one more would fence a quorum (the breaker)"
                        ),
                    });
                }
                b.fenced = true;
                let fenced = Change::BrokerFenced { node_id: *node_id };
                Ok(with_elections(fenced, self.reelect(*node_id, true)))
            }
            Command::AllocateProducerIds { node_id } => {
                if self.producer_id_blocks >= MAX_PRODUCER_ID_BLOCKS {
                    return Err(Refusal::ProducerIdsExhausted);
                }
                let first = (self.producer_id_blocks * PRODUCER_ID_BLOCK_SIZE) as i64;
                self.producer_id_blocks += 1;
                Ok(Change::ProducerIdsAllocated {
                    node_id: *node_id,
                    first,
                })
            }
            Command::UpsertScramCredential {
                user,
                mechanism,
                credential,
            } => {
                let bad = |reason: String| Refusal::InvalidScramCredential {
                    user: user.clone(),
                    reason,
                };
                if user.is_empty() || user.len() > MAX_SCRAM_USER_BYTES {
                    return Err(bad(format!(
                        "a user name is 1 to {MAX_SCRAM_USER_BYTES} bytes"
                    )));
                }
                if [
                    &credential.salt,
                    &credential.stored_key,
                    &credential.server_key,
                ]
                .iter()
                .any(|f| f.is_empty() || f.len() > MAX_SCRAM_FIELD_BYTES)
                {
                    return Err(bad(format!(
                        "salt and keys are 1 to {MAX_SCRAM_FIELD_BYTES} bytes"
                    )));
                }
                if !self.scram_users.contains_key(user) && self.scram_users.len() >= MAX_SCRAM_USERS
                {
                    return Err(bad(format!(
                        "the metastore holds {MAX_SCRAM_USERS} users at most"
                    )));
                }
                let u = self.scram_users.entry(user.clone()).or_default();
                *u.slot(*mechanism) = Some((**credential).clone());
                Ok(Change::ScramUserChanged {
                    user: user.clone(),
                    credentials: Box::new(u.clone()),
                })
            }
            Command::DeleteScramCredential { user, mechanism } => {
                let gone = self
                    .scram_users
                    .get_mut(user)
                    .and_then(|u| u.slot(*mechanism).take());
                if gone.is_none() {
                    return Err(Refusal::NoScramCredential {
                        user: user.clone(),
                        mechanism: mechanism.sasl_name().into(),
                    });
                }
                let left = self.scram_users.get(user).cloned().unwrap_or_default();
                if left.is_empty() {
                    self.scram_users.remove(user);
                }
                Ok(Change::ScramUserChanged {
                    user: user.clone(),
                    credentials: Box::new(left),
                })
            }
            Command::CreateAcls { bindings } => {
                if let Some(b) = bindings.iter().find(|b| {
                    [&b.resource_name, &b.principal, &b.host]
                        .iter()
                        .any(|f| f.len() > MAX_ACL_FIELD_BYTES)
                }) {
                    return Err(Refusal::InvalidAcl {
                        reason: format!("{b:?}: a field is over {MAX_ACL_FIELD_BYTES} bytes"),
                    });
                }
                let added: Vec<AclBinding> = bindings
                    .iter()
                    .filter(|b| self.acls.binary_search(b).is_err())
                    .cloned()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if self.acls.len() + added.len() > MAX_ACLS {
                    return Err(Refusal::InvalidAcl {
                        reason: format!("the metastore holds {MAX_ACLS} ACLs at most"),
                    });
                }
                self.acls.extend(added.iter().cloned());
                self.acls.sort();
                Ok(Change::AclsChanged {
                    added: Box::new(added),
                    removed: Box::default(),
                })
            }
            Command::DeleteAcls { bindings } => {
                let removed: Vec<AclBinding> = bindings
                    .iter()
                    .filter(|b| self.acls.binary_search(b).is_ok())
                    .cloned()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                self.acls.retain(|a| removed.binary_search(a).is_err());
                Ok(Change::AclsChanged {
                    added: Box::default(),
                    removed: Box::new(removed),
                })
            }
            Command::AlterClientQuota { alter } => {
                let quota = self.altered_quota(alter)?;
                self.set_client_quota(&quota);
                Ok(Change::ClientQuotaSet {
                    quota: Box::new(quota),
                })
            }
            Command::DefineBarrierGroup { def } => {
                let def = self.checked_barrier_group(def)?;
                self.barrier_groups
                    .groups
                    .insert(def.name.clone(), def.clone());
                Ok(Change::BarrierGroupDefined { def })
            }
            Command::DeleteBarrierGroup { name } => {
                if self.barrier_groups.groups.remove(name).is_none() {
                    return Err(Refusal::UnknownBarrierGroup { name: name.clone() });
                }
                Ok(Change::BarrierGroupDeleted { name: name.clone() })
            }
            Command::SetBrokerListeners { node_id, listeners } => {
                let bad = |reason: String| Refusal::InvalidBroker {
                    node_id: *node_id,
                    reason,
                };
                if !self.brokers.contains_key(node_id) {
                    return Err(bad("not registered".into()));
                }
                if listeners.len() > MAX_LISTENERS_PER_BROKER {
                    return Err(bad(format!(
                        "{} listeners, more than {MAX_LISTENERS_PER_BROKER}",
                        listeners.len()
                    )));
                }
                let mut names = std::collections::BTreeSet::new();
                for l in listeners.iter() {
                    if l.name.is_empty()
                        || l.name.len() > MAX_LISTENER_FIELD_BYTES
                        || l.host.is_empty()
                        || l.host.len() > MAX_LISTENER_FIELD_BYTES
                        || !names.insert(l.name.as_str())
                    {
                        return Err(bad(format!("listener {:?} at {:?}: an empty, long or repeated name, or an empty or long host", l.name, l.host)));
                    }
                }
                self.broker_listeners
                    .insert(*node_id, (**listeners).clone());
                Ok(Change::BrokerListenersSet {
                    node_id: *node_id,
                    listeners: listeners.clone(),
                })
            }
            Command::SetClusterId { id } => {
                if let Some(set) = &self.cluster_id {
                    return Err(Refusal::ClusterIdSet { id: set.clone() });
                }
                if id.is_empty() || id.len() > MAX_CLUSTER_ID_BYTES {
                    return Err(Refusal::InvalidClusterId {
                        reason: format!("must be 1 to {MAX_CLUSTER_ID_BYTES} bytes"),
                    });
                }
                self.cluster_id = Some(id.clone());
                Ok(Change::ClusterIdSet { id: id.clone() })
            }
            Command::DetachChild { parent, child } => {
                match self.fanout_links.links.get(child) {
                    Some(l) if &l.parent == parent => {}
                    _ => {
                        return Err(Refusal::InvalidFanout {
                            child: child.clone(),
                            reason: format!("'{child}' is not attached to '{parent}'"),
                        })
                    }
                }
                let l = self
                    .fanout_links
                    .links
                    .remove(child)
                    .expect("checked above: the link exists");
                Ok(Change::ChildDetached {
                    parent: l.parent,
                    child: l.child,
                    epoch: l.epoch,
                })
            }
        }
    }

    /// The registration of `node_id` if it is of `incarnation`.
    fn registered(
        &mut self,
        node_id: u64,
        incarnation: u64,
    ) -> Result<&mut BrokerRegistration, Refusal> {
        match self.brokers.get_mut(&node_id) {
            Some(b) if b.incarnation == incarnation => Ok(b),
            Some(_) => Err(Refusal::InvalidBroker {
                node_id,
                reason: "another start of this node registered since (stale incarnation)".into(),
            }),
            None => Err(Refusal::InvalidBroker {
                node_id,
                reason: "not registered".into(),
            }),
        }
    }

    /// The registered brokers that are not fenced, by node id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// The attach rules of seed 000: both topics exist and differ, one parent per child, no
    /// chains either way, at most [`MAX_FANOUT_CHILDREN_PER_PARENT`], delay at most
    /// [`MAX_FANOUT_DELAY_MS`], an explicit parent `retention.ms` at least `delay + 1 h`, one
    /// attach offset per parent partition.
    fn check_attach(
        &self,
        parent: &str,
        child: &str,
        delay_ms: u64,
        epoch: &str,
        attach_offsets: &[u64],
    ) -> Result<(), Refusal> {
        let refuse = |reason: String| {
            Err(Refusal::InvalidFanout {
                child: child.to_string(),
                reason,
            })
        };
        let p = self
            .topics
            .get(parent)
            .ok_or_else(|| Refusal::UnknownTopicOrPartition {
                name: parent.to_string(),
                partition: None,
            })?;
        if !self.topics.contains_key(child) {
            return Err(Refusal::UnknownTopicOrPartition {
                name: child.to_string(),
                partition: None,
            });
        }
        if parent == child {
            return refuse("a topic cannot be its own child".into());
        }
        if let Some(l) = self.fanout_links.of_child(child) {
            return refuse(format!(
                "'{child}' already has parent '{}' (one parent per child)",
                l.parent
            ));
        }
        if self.fanout_links.is_parent(child) {
            return refuse(format!("'{child}' is a parent itself (no chains)"));
        }
        if let Some(l) = self.fanout_links.of_child(parent) {
            return refuse(format!(
                "'{parent}' is a child of '{}' (no chains)",
                l.parent
            ));
        }
        let children = self.fanout_links.children_of(parent).count();
        if children >= MAX_FANOUT_CHILDREN_PER_PARENT {
            return refuse(format!(
                "'{parent}' already has {children} children (at most {MAX_FANOUT_CHILDREN_PER_PARENT})"
            ));
        }
        if delay_ms > MAX_FANOUT_DELAY_MS {
            return refuse(format!(
                "delay {delay_ms} ms is over one year ({MAX_FANOUT_DELAY_MS} ms)"
            ));
        }
        if let (Some(floor), Some(r)) = (
            fanout_retention_floor_ms(delay_ms),
            p.configs.get(RETENTION_MS_CONFIG),
        ) {
            if !retention_satisfies(r, floor) {
                return refuse(format!(
                    "parent '{parent}' {RETENTION_MS_CONFIG}={r} is below delay + 1 h ({floor} ms)"
                ));
            }
        }
        if epoch.len() != FANOUT_EPOCH_HEX_CHARS || !epoch.bytes().all(|b| b.is_ascii_hexdigit()) {
            return refuse(format!(
                "epoch '{epoch}' is not {FANOUT_EPOCH_HEX_CHARS} hex chars"
            ));
        }
        if attach_offsets.len() != p.partitions as usize {
            return refuse(format!(
                "{} attach offsets for {} parent partitions",
                attach_offsets.len(),
                p.partitions
            ));
        }
        Ok(())
    }

    /// Applies a change received by a subscriber to its own copy. Returns false if the change
    /// does not fit the copy (a bug or a missed change); the caller should resubscribe.
    pub fn apply_change(&mut self, change: &Change) -> bool {
        match change {
            Change::TopicCreated { topic, assignments } => {
                self.topics.insert(topic.name.clone(), topic.clone());
                self.assignments
                    .insert(topic.name.clone(), assignments.clone());
                true
            }
            Change::TopicDeleted { name, .. } => {
                self.assignments.remove(name);
                self.replicas.remove(name);
                self.fanout_links.forget_topic(name);
                self.barrier_groups.forget_topic(name);
                self.topics.remove(name).is_some()
            }
            Change::PartitionsAdded {
                name,
                new_total,
                assignments,
            } => match (self.topics.get_mut(name), self.assignments.get_mut(name)) {
                (Some(t), Some(a)) => {
                    t.partitions = *new_total;
                    a.extend_from_slice(assignments);
                    self.fanout_links.parent_grew(name, *new_total);
                    a.len() == *new_total as usize
                }
                _ => false,
            },
            Change::ConfigsAltered { name, configs } => match self.topics.get_mut(name) {
                Some(t) => {
                    t.configs = configs.clone();
                    true
                }
                None => false,
            },
            Change::AssignmentSet {
                name,
                partition,
                assignment,
            } => match self
                .assignments
                .get_mut(name)
                .and_then(|a| a.get_mut(*partition as usize))
            {
                Some(slot) => {
                    *slot = *assignment;
                    true
                }
                None => false,
            },
            Change::ChildAttached { link } => {
                let known =
                    self.topics.contains_key(&link.parent) && self.topics.contains_key(&link.child);
                self.fanout_links
                    .links
                    .insert(link.child.clone(), link.clone());
                known
            }
            Change::ChildDetached { child, .. } => self.fanout_links.links.remove(child).is_some(),
            Change::BrokerRegistered { broker } => {
                self.brokers.insert(broker.node_id, (**broker).clone());
                true
            }
            Change::BrokerHeartbeat { node_id, .. } => match self.brokers.get_mut(node_id) {
                Some(b) => {
                    b.fenced = false;
                    true
                }
                None => false,
            },
            Change::ClusterIdSet { id } => {
                self.cluster_id = Some(id.clone());
                true
            }
            Change::AclsChanged { added, removed } => {
                self.acls.retain(|a| removed.binary_search(a).is_err());
                self.acls.extend(added.iter().cloned());
                self.acls.sort();
                self.acls.dedup();
                true
            }
            Change::BrokerListenersSet { node_id, listeners } => {
                self.broker_listeners
                    .insert(*node_id, (**listeners).clone());
                true
            }
            Change::ClientQuotaSet { quota } => {
                self.set_client_quota(quota);
                true
            }
            Change::ScramUserChanged { user, credentials } => {
                if credentials.is_empty() {
                    self.scram_users.remove(user);
                } else {
                    self.scram_users
                        .insert(user.clone(), (**credentials).clone());
                }
                true
            }
            Change::ProducerIdsAllocated { first, .. } => {
                self.producer_id_blocks = *first as u64 / PRODUCER_ID_BLOCK_SIZE + 1;
                true
            }
            Change::BrokerFenced { node_id } => match self.brokers.get_mut(node_id) {
                Some(b) => {
                    b.fenced = true;
                    true
                }
                None => false,
            },
            Change::SnapshotInstalled { state } => {
                *self = (**state).clone();
                true
            }
            // Stops at the first change that does not fit: the copy is stale either way.
            Change::Batch(changes) => changes.iter().all(|c| self.apply_change(c)),
            Change::BarrierGroupDefined { def } => {
                let known = def.topics.iter().all(|t| self.topics.contains_key(t));
                self.barrier_groups
                    .groups
                    .insert(def.name.clone(), def.clone());
                known
            }
            Change::BarrierGroupDeleted { name } => {
                self.barrier_groups.groups.remove(name).is_some()
            }
            Change::ReplicasSet {
                name,
                first_partition,
                replicas,
            } => self.set_replicas(name, *first_partition, replicas),
        }
    }
}

// ---- replicated partitions (issue #18; the types and rules: `crate::replication`) ----

/// Checks a requested replica placement: one list per partition, each of the same length,
/// 1 to `MAX_REPLICATION_FACTOR` replicas on distinct nodes.
pub fn validate_placement(name: &str, replicas: &[Vec<Assignment>]) -> Result<usize, Refusal> {
    let bad = |reason: String| Refusal::InvalidAssignment {
        name: name.to_string(),
        reason,
    };
    let rf = replicas.first().map_or(1, Vec::len);
    for (p, r) in replicas.iter().enumerate() {
        if r.len() != rf {
            return Err(bad(format!(
                "partition {p} has {} replicas, partition 0 has {rf}: every partition has the same replication factor",
                r.len()
            )));
        }
        PartitionReplicas::new(r.clone())
            .check()
            .map_err(|why| bad(format!("partition {p}: {why}")))?;
    }
    Ok(rf)
}

impl MetaState {
    /// The replicas of `topic`/`partition`, if it is a replicated partition.
    pub fn replica_set(&self, topic: &str, partition: u32) -> Option<&PartitionReplicas> {
        self.replicas.get(topic)?.get(partition as usize)
    }

    /// The replication factor of `topic` (1 for a partition not replicated).
    pub fn replication_factor(&self, topic: &str) -> usize {
        self.replicas
            .get(topic)
            .and_then(|r| r.first())
            .map_or(1, |r| r.target().len())
    }

    fn broker_live(&self, node: u64) -> bool {
        self.brokers.get(&node).is_some_and(|b| !b.fenced)
    }

    /// Sets the replica state of `name`'s partitions from `first` on, and the leaders' places
    /// in `assignments`; `false` if the topic or a partition is unknown.
    pub(crate) fn set_replicas(
        &mut self,
        name: &str,
        first: u32,
        replicas: &[PartitionReplicas],
    ) -> bool {
        let (Some(a), Some(t)) = (self.assignments.get_mut(name), self.topics.get(name)) else {
            return false;
        };
        let set = self.replicas.entry(name.to_string()).or_default();
        for (i, r) in replicas.iter().enumerate() {
            let p = first as usize + i;
            if p >= t.partitions as usize {
                return false;
            }
            // The leader's place; with none, the replica of the node it names now (its core
            // may have moved, `MoveReplicaCore`).
            match r.leader_assignment() {
                Some(l) => a[p] = l,
                None => {
                    if let Some(here) = r.replica_on(a[p].node_id) {
                        a[p] = here;
                    }
                }
            }
            if p < set.len() {
                set[p] = r.clone();
            } else if p == set.len() {
                set.push(r.clone());
            } else {
                return false;
            }
        }
        true
    }

    /// `AlterIsr`: the leader's new ISR for a partition.
    pub(crate) fn alter_isr(
        &mut self,
        name: &str,
        partition: u32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: &[u64],
    ) -> Result<Change, Refusal> {
        let refuse = |reason: String| Refusal::InvalidAssignment {
            name: name.to_string(),
            reason: format!("partition {partition}: {reason}"),
        };
        let cur = self
            .replica_set(name, partition)
            .ok_or_else(|| Refusal::UnknownTopicOrPartition {
                name: name.to_string(),
                partition: Some(partition),
            })?
            .clone();
        if cur.leader_epoch != leader_epoch || cur.partition_epoch != partition_epoch {
            return Err(refuse(format!(
                "stale ISR change (leader epoch {leader_epoch}, partition epoch {partition_epoch}; now {} and {})",
                cur.leader_epoch, cur.partition_epoch
            )));
        }
        let Some(leader) = cur.leader else {
            return Err(refuse("no leader".into()));
        };
        if !isr.contains(&leader) {
            return Err(refuse(format!("the ISR must hold the leader {leader}")));
        }
        let added_fenced = isr
            .iter()
            .any(|n| !cur.in_sync(*n) && !self.broker_live(*n));
        if added_fenced {
            return Err(refuse("a fenced node cannot join the ISR".into()));
        }
        let mut next = cur.clone();
        // In replica order, each once.
        next.isr = cur
            .replicas
            .iter()
            .map(|a| a.node_id)
            .filter(|n| isr.contains(n))
            .collect();
        if next.isr.len() != isr.len() {
            return Err(refuse(format!("ISR {isr:?} is not a set of the replicas")));
        }
        next.partition_epoch += 1;
        if next.reassigning() && self.reassignment_can_complete(&next) {
            self.complete_reassignment(&mut next);
        }
        self.replace_replicas(name, partition, next)
    }

    /// Makes `next` the replica state of `name`/`partition` once its invariants hold (a
    /// refusal names the partition): the change every node applies.
    fn replace_replicas(
        &mut self,
        name: &str,
        partition: u32,
        next: PartitionReplicas,
    ) -> Result<Change, Refusal> {
        next.check().map_err(|reason| Refusal::InvalidAssignment {
            name: name.to_string(),
            reason: format!("partition {partition}: {reason}"),
        })?;
        self.set_replicas(name, partition, std::slice::from_ref(&next));
        Ok(Change::ReplicasSet {
            name: name.to_string(),
            first_partition: partition,
            replicas: vec![next],
        })
    }

    /// `ReassignReplicas`: starts (or replaces) a reassignment to `target`, or cancels the
    /// one under way (`None`); completes at once when every target replica is in sync.
    pub(crate) fn reassign(
        &mut self,
        name: &str,
        partition: u32,
        target: Option<&[Assignment]>,
    ) -> Result<Change, Refusal> {
        let refuse = |reason: String| Refusal::InvalidAssignment {
            name: name.to_string(),
            reason: format!("partition {partition}: {reason}"),
        };
        // A topic not replicated yet gets replica state for every partition: each one's
        // owner its only replica and leader (the partition reassigned grows from there).
        let mut whole = match self.replicas.get(name) {
            Some(_) => None,
            None if target.is_some() => self.unreplicated_as_replicas(name),
            None => None,
        };
        let cur = match (&whole, self.replica_set(name, partition)) {
            (Some(sets), _) => sets.get(partition as usize).cloned(),
            (None, set) => set.cloned(),
        };
        let Some(cur) = cur else {
            return Err(match self.topics.get(name) {
                Some(t) if partition < t.partitions => Refusal::NoReassignmentInProgress {
                    name: name.to_string(),
                    partition,
                },
                _ => Refusal::UnknownTopicOrPartition {
                    name: name.to_string(),
                    partition: Some(partition),
                },
            });
        };
        let original = cur.original();
        let target: Vec<Assignment> = match target {
            None if !cur.reassigning() => {
                return Err(Refusal::NoReassignmentInProgress {
                    name: name.to_string(),
                    partition,
                })
            }
            None => original.clone(),
            Some(t) => {
                PartitionReplicas::new(t.to_vec()).check().map_err(refuse)?;
                for a in t {
                    if !self.brokers.contains_key(&a.node_id) {
                        return Err(refuse(format!("node {} is not registered", a.node_id)));
                    }
                    if let Some(here) = cur.replica_on(a.node_id) {
                        if here.core_index != a.core_index {
                            return Err(refuse(format!(
                                "the replica on node {} is on core {}: a reassignment moves replicas between nodes, not cores",
                                a.node_id, here.core_index
                            )));
                        }
                    }
                }
                t.to_vec()
            }
        };
        let on = |list: &[Assignment], n: u64| list.iter().any(|a| a.node_id == n);
        let mut next = cur.clone();
        next.adding = target
            .iter()
            .map(|a| a.node_id)
            .filter(|n| !on(&original, *n))
            .collect();
        next.removing = original
            .iter()
            .map(|a| a.node_id)
            .filter(|n| !on(&target, *n))
            .collect();
        next.replicas = target.clone();
        next.replicas
            .extend(original.iter().copied().filter(|a| !on(&target, a.node_id)));
        next.isr = next
            .replicas
            .iter()
            .map(|a| a.node_id)
            .filter(|n| cur.in_sync(*n))
            .collect();
        if next.isr.is_empty() {
            return Err(refuse(format!(
                "no in-sync replica ({:?}) would be left",
                cur.isr
            )));
        }
        next.partition_epoch += 1;
        if next.reassigning() && self.reassignment_can_complete(&next) {
            self.complete_reassignment(&mut next);
        }
        self.elect_if_removed(&mut next);
        if next.leader.is_none()
            && next
                .replica_on(self.assignments[name][partition as usize].node_id)
                .is_none()
        {
            return Err(refuse(format!(
                "the leader would be removed with no live in-sync replica ({:?}) to take over",
                next.isr
            )));
        }
        match whole.take() {
            // Every partition's replica state at once (the others as they were).
            Some(mut sets) => {
                next.check().map_err(refuse)?;
                sets[partition as usize] = next;
                self.set_replicas(name, 0, &sets);
                Ok(Change::ReplicasSet {
                    name: name.to_string(),
                    first_partition: 0,
                    replicas: sets,
                })
            }
            None => self.replace_replicas(name, partition, next),
        }
    }

    /// `ElectLeader`: a preferred (`unclean` false) or unclean election of one partition's
    /// leader, at the next leader epoch.
    pub(crate) fn elect_leader(
        &mut self,
        name: &str,
        partition: u32,
        unclean: bool,
    ) -> Result<Change, Refusal> {
        let Some(cur) = self.replica_set(name, partition).cloned() else {
            return match self.topics.get(name) {
                Some(t) if partition < t.partitions => Err(Refusal::ElectionNotNeeded {
                    name: name.to_string(),
                    partition,
                    reason: "it is not replicated: its one replica leads it".into(),
                }),
                _ => Err(Refusal::UnknownTopicOrPartition {
                    name: name.to_string(),
                    partition: Some(partition),
                }),
            };
        };
        let mut next = cur.clone();
        if unclean {
            if let Some(l) = cur.leader {
                return Err(Refusal::ElectionNotNeeded {
                    name: name.to_string(),
                    partition,
                    reason: format!("node {l} leads it"),
                });
            }
            let in_sync = cur.isr.iter().copied().find(|n| self.broker_live(*n));
            let any = cur
                .target()
                .iter()
                .map(|a| a.node_id)
                .find(|n| self.broker_live(*n));
            let Some(l) = in_sync.or(any) else {
                return Err(Refusal::EligibleLeadersNotAvailable {
                    name: name.to_string(),
                    partition,
                    reason: format!(
                        "no replica of {:?} is on a live node",
                        cur.replicas.iter().map(|a| a.node_id).collect::<Vec<_>>()
                    ),
                });
            };
            if in_sync.is_none() {
                tracing::warn!(
                    topic = name,
                    partition,
                    leader = l,
                    "unclean leader election: records may be lost"
                );
                next.isr = vec![l];
            }
            next.leader = Some(l);
        } else {
            let preferred = cur.target()[0].node_id;
            let refuse = |reason: String| Refusal::PreferredLeaderNotAvailable {
                name: name.to_string(),
                partition,
                reason,
            };
            if cur.leader == Some(preferred) {
                return Err(Refusal::ElectionNotNeeded {
                    name: name.to_string(),
                    partition,
                    reason: format!("its preferred replica (node {preferred}) leads it"),
                });
            }
            if !self.broker_live(preferred) {
                return Err(refuse(format!("node {preferred} is not live")));
            }
            if !cur.in_sync(preferred) {
                return Err(refuse(format!(
                    "node {preferred} is not in the ISR {:?}",
                    cur.isr
                )));
            }
            next.leader = Some(preferred);
        }
        next.leader_epoch += 1;
        next.partition_epoch += 1;
        self.replace_replicas(name, partition, next)
    }

    /// `MoveReplicaCore`: node `node`'s replica of `name`/`partition` moves to its core
    /// `core`; the leader's move is a new leader epoch (its followers truncate against it
    /// as after any leader change).
    pub(crate) fn move_replica_core(
        &mut self,
        name: &str,
        partition: u32,
        node: u64,
        core: u32,
    ) -> Result<Change, Refusal> {
        let refuse = |reason: String| Refusal::InvalidAssignment {
            name: name.to_string(),
            reason: format!("partition {partition}: {reason}"),
        };
        let Some(cur) = self.replica_set(name, partition).cloned() else {
            return Err(match self.topics.get(name) {
                Some(t) if partition < t.partitions => {
                    refuse("it is not replicated: it moves with SetAssignment".into())
                }
                _ => Refusal::UnknownTopicOrPartition {
                    name: name.to_string(),
                    partition: Some(partition),
                },
            });
        };
        if cur.reassigning() {
            return Err(refuse(
                "a reassignment is under way: move the replica once it completes (or cancel it)"
                    .into(),
            ));
        }
        let cores = self.brokers.get(&node).map_or(0, |b| b.cores);
        if core >= cores {
            return Err(refuse(format!(
                "node {node} has {cores} cores: there is no core {core}"
            )));
        }
        let Some(i) = cur.replicas.iter().position(|a| a.node_id == node) else {
            return Err(refuse(format!("node {node} holds no replica")));
        };
        if cur.replicas[i].core_index == core {
            return Err(refuse(format!(
                "the replica on node {node} is on core {core} already"
            )));
        }
        let mut next = cur.clone();
        next.replicas[i].core_index = core;
        if cur.leader == Some(node) {
            next.leader_epoch += 1;
        }
        next.partition_epoch += 1;
        self.replace_replicas(name, partition, next)
    }

    /// The preferred elections an auto leader rebalance makes (Kafka's
    /// `auto.leader.rebalance.enable`): for every live node whose share of the partitions it
    /// is the preferred replica of (the first of their target replicas) but does not lead is
    /// over `imbalance_percentage`, those of them it can lead now (in sync, no reassignment
    /// under way), at most `max`, in topic and partition order.
    pub fn preferred_elections_due(
        &self,
        imbalance_percentage: u32,
        max: usize,
    ) -> Vec<(String, u32)> {
        /// A node's partitions as their preferred replica.
        #[derive(Default)]
        struct Preferred {
            all: u64,
            not_led: u64,
            takeable: Vec<(String, u32)>,
        }
        let mut per_node: BTreeMap<u64, Preferred> = BTreeMap::new();
        for (name, parts) in &self.replicas {
            for (p, r) in parts.iter().enumerate() {
                let preferred = r.target()[0].node_id;
                let entry = per_node.entry(preferred).or_default();
                entry.all += 1;
                if r.leader != Some(preferred) {
                    entry.not_led += 1;
                    if !r.reassigning() && r.in_sync(preferred) {
                        entry.takeable.push((name.clone(), p as u32));
                    }
                }
            }
        }
        let mut due = Vec::new();
        for (node, n) in per_node {
            // Over the threshold: not led / preferred > percentage / 100.
            if self.broker_live(node) && n.not_led * 100 > u64::from(imbalance_percentage) * n.all {
                due.extend(n.takeable);
            }
        }
        due.sort();
        due.truncate(max);
        due
    }

    /// Replica state for every partition of `name`, a topic not replicated: its owner the
    /// only replica, in sync, leading while its node is live (epoch 0, as it has served).
    fn unreplicated_as_replicas(&self, name: &str) -> Option<Vec<PartitionReplicas>> {
        let owners = self.assignments.get(name)?;
        Some(
            owners
                .iter()
                .map(|a| {
                    let mut r = PartitionReplicas::new(vec![*a]);
                    r.leader = self.broker_live(a.node_id).then_some(a.node_id);
                    r
                })
                .collect(),
        )
    }

    /// Whether a reassignment under way can complete: every target replica is in sync, and
    /// a leader it removes has a live in-sync target replica to hand over to.
    fn reassignment_can_complete(&self, r: &PartitionReplicas) -> bool {
        let target = r.target();
        let all_in_sync = target.iter().all(|a| r.in_sync(a.node_id));
        let leader_stays = r
            .leader
            .is_none_or(|l| target.iter().any(|a| a.node_id == l));
        all_in_sync && (leader_stays || target.iter().any(|a| self.broker_live(a.node_id)))
    }

    /// Ends a reassignment: the replicas become its target, the ISR keeps target nodes only,
    /// and a removed leader hands over.
    fn complete_reassignment(&self, r: &mut PartitionReplicas) {
        r.replicas = r.target();
        r.adding.clear();
        r.removing.clear();
        let replicas = r.replicas.clone();
        r.isr.retain(|n| replicas.iter().any(|a| a.node_id == *n));
        self.elect_if_removed(r);
    }

    /// A leader no longer among `r`'s replicas hands over to the first live in-sync replica
    /// (none: the partition is offline until one comes back), at the next leader epoch.
    fn elect_if_removed(&self, r: &mut PartitionReplicas) {
        if r.leader.is_some_and(|l| r.replica_on(l).is_none()) {
            r.leader_epoch += 1;
            r.leader = r.isr.iter().copied().find(|n| self.broker_live(*n));
        }
    }

    /// The elections and ISR changes after node `node` was fenced (`fenced`) or came back:
    /// one `ReplicasSet` per partition that changed, applied here already.
    pub(crate) fn reelect(&mut self, node: u64, fenced: bool) -> Vec<Change> {
        let mut changes = Vec::new();
        let names: Vec<String> = self.replicas.keys().cloned().collect();
        for name in names {
            let unclean = self
                .topics
                .get(&name)
                .and_then(|t| t.configs.get(UNCLEAN_LEADER_ELECTION_CONFIG))
                .is_some_and(|v| v == "true");
            let parts = self.replicas[&name].clone();
            for (p, cur) in parts.iter().enumerate() {
                if cur.replica_on(node).is_none() {
                    continue;
                }
                let next = if fenced {
                    self.after_fence(cur, node, unclean)
                } else {
                    self.after_return(cur, node)
                };
                if let Some(next) = next {
                    self.set_replicas(&name, p as u32, std::slice::from_ref(&next));
                    changes.push(Change::ReplicasSet {
                        name: name.clone(),
                        first_partition: p as u32,
                        replicas: vec![next],
                    });
                }
            }
        }
        changes
    }

    fn after_fence(
        &self,
        cur: &PartitionReplicas,
        node: u64,
        unclean: bool,
    ) -> Option<PartitionReplicas> {
        let mut next = cur.clone();
        let live_isr = |n: &u64| *n != node && self.broker_live(*n);
        if cur.leader == Some(node) {
            next.leader_epoch += 1;
            match cur.isr.iter().copied().find(live_isr) {
                Some(l) => {
                    next.leader = Some(l);
                    next.isr.retain(|n| *n != node);
                }
                None if unclean => {
                    let any = cur
                        .replicas
                        .iter()
                        .map(|a| a.node_id)
                        .find(|n| *n != node && self.broker_live(*n));
                    next.leader = any;
                    if let Some(l) = any {
                        tracing::warn!(leader = l, "unclean leader election: records may be lost");
                        next.isr = vec![l];
                    }
                }
                None => next.leader = None,
            }
        } else if cur.in_sync(node) && cur.isr.len() > 1 {
            next.isr.retain(|n| *n != node);
        } else {
            return None;
        }
        next.partition_epoch += 1;
        Some(next)
    }

    fn after_return(&self, cur: &PartitionReplicas, node: u64) -> Option<PartitionReplicas> {
        if cur.leader.is_some() || !cur.in_sync(node) {
            return None;
        }
        let mut next = cur.clone();
        next.leader = Some(node);
        next.leader_epoch += 1;
        next.partition_epoch += 1;
        Some(next)
    }

    /// The replica invariants (`check_invariants`).
    pub(crate) fn check_replicas(&self) -> Result<(), String> {
        for (name, parts) in &self.replicas {
            let t = self
                .topics
                .get(name)
                .ok_or_else(|| format!("replicas of unknown topic '{name}'"))?;
            if parts.len() != t.partitions as usize {
                return Err(format!(
                    "'{name}': replicas of {} partitions, the topic has {}",
                    parts.len(),
                    t.partitions
                ));
            }
            for (p, r) in parts.iter().enumerate() {
                r.check()
                    .map_err(|e| format!("'{name}' partition {p}: {e}"))?;
                let a = self.assignments[name][p];
                if r.replica_on(a.node_id) != Some(a) {
                    return Err(format!(
                        "'{name}' partition {p}: assignment {a:?} is not a replica"
                    ));
                }
                if r.leader.is_some_and(|l| l != a.node_id) {
                    return Err(format!(
                        "'{name}' partition {p}: the assignment is not the leader's"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `change`, followed by the elections it caused (none: `change` alone).
fn with_elections(change: Change, elections: Vec<Change>) -> Change {
    if elections.is_empty() {
        return change;
    }
    let mut all = vec![change];
    all.extend(elections);
    Change::Batch(all)
}

/// A random u64 from the std library's randomly keyed SipHash (no extra dependency).
pub fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(n: usize) -> Vec<Assignment> {
        (0..n)
            .map(|i| Assignment {
                node_id: 1,
                core_index: i as u32,
            })
            .collect()
    }

    #[test]
    fn create_delete_add_alter_assign() {
        let mut s = MetaState::default();
        let c = Command::create_topic("orders", 3, BTreeMap::new(), a(3));
        assert!(matches!(s.apply(&c), Ok(Change::TopicCreated { .. })));
        let e = s.apply(&c).unwrap_err();
        assert!(matches!(e, Refusal::TopicAlreadyExists { .. }));
        let e = s
            .apply(&Command::AddPartitions {
                name: "orders".into(),
                new_total: 2,
                assignments: vec![],
            })
            .unwrap_err();
        assert!(matches!(e, Refusal::InvalidPartitions { .. }));
        s.apply(&Command::AddPartitions {
            name: "orders".into(),
            new_total: 5,
            assignments: a(2),
        })
        .unwrap();
        assert_eq!(s.topic("orders").unwrap().partitions, 5);
        s.apply(&Command::SetAssignment {
            name: "orders".into(),
            partition: 4,
            assignment: Assignment {
                node_id: 9,
                core_index: 1,
            },
        })
        .unwrap();
        assert_eq!(s.assignment("orders", 4).unwrap().node_id, 9);
        let e = s
            .apply(&Command::SetAssignment {
                name: "orders".into(),
                partition: 5,
                assignment: Assignment {
                    node_id: 9,
                    core_index: 1,
                },
            })
            .unwrap_err();
        assert!(matches!(e, Refusal::UnknownTopicOrPartition { .. }));
        let mut set = BTreeMap::new();
        set.insert("retention.ms".to_string(), "1000".to_string());
        s.apply(&Command::AlterConfigs {
            name: "orders".into(),
            set,
            remove: vec![],
        })
        .unwrap();
        assert_eq!(s.topic("orders").unwrap().configs["retention.ms"], "1000");
        s.apply(&Command::DeleteTopic {
            name: "orders".into(),
        })
        .unwrap();
        assert!(s.topics.is_empty() && s.assignments.is_empty());
        let e = s
            .apply(&Command::DeleteTopic {
                name: "orders".into(),
            })
            .unwrap_err();
        assert!(matches!(e, Refusal::UnknownTopicOrPartition { .. }));
    }

    #[test]
    fn refusals() {
        let mut s = MetaState::default();
        let e = s
            .apply(&Command::create_topic("t", 0, BTreeMap::new(), vec![]))
            .unwrap_err();
        assert!(matches!(e, Refusal::InvalidPartitions { .. }));
        let e = s
            .apply(&Command::create_topic("bad/name", 1, BTreeMap::new(), a(1)))
            .unwrap_err();
        assert!(matches!(e, Refusal::InvalidTopic { .. }));
        let e = s
            .apply(&Command::create_topic("t", 2, BTreeMap::new(), a(1)))
            .unwrap_err();
        assert!(matches!(e, Refusal::InvalidAssignment { .. }));
        assert_eq!(s, MetaState::default());
    }

    #[test]
    fn subscriber_copy_follows_changes() {
        let mut s = MetaState::default();
        let mut copy = MetaState::default();
        for cmd in [
            Command::create_topic("a", 2, BTreeMap::new(), a(2)),
            Command::AddPartitions {
                name: "a".into(),
                new_total: 4,
                assignments: a(2),
            },
            Command::create_topic("b", 1, BTreeMap::new(), a(1)),
            Command::DeleteTopic { name: "b".into() },
        ] {
            let ch = s.apply(&cmd).unwrap();
            assert!(copy.apply_change(&ch));
        }
        assert_eq!(s, copy);
    }

    fn topics(s: &mut MetaState, names: &[(&str, usize)]) {
        for (n, p) in names {
            s.apply(&Command::create_topic(
                *n,
                *p as u32,
                BTreeMap::new(),
                a(*p),
            ))
            .unwrap();
        }
    }

    fn fanout_reason(e: Refusal) -> String {
        assert!(
            matches!(
                e,
                Refusal::InvalidConfig { .. } | Refusal::InvalidFanout { .. }
            ),
            "{e}"
        );
        e.to_string()
    }

    #[test]
    fn fanout_attach_detach_and_rules() {
        let mut s = MetaState::default();
        topics(
            &mut s,
            &[("orders", 2), ("audit", 4), ("retry", 2), ("x", 1)],
        );
        let ch = s
            .apply(&Command::attach_child("orders", "audit", 0, vec![5, 7]))
            .unwrap();
        let Change::ChildAttached { link } = ch else {
            panic!("{ch:?}")
        };
        assert_eq!(link.epoch.len(), FANOUT_EPOCH_HEX_CHARS);
        assert_eq!(link.attach_offsets, vec![5, 7]);
        assert_eq!(s.fanout_links.of_child("audit").unwrap().parent, "orders");
        // Unknown topics.
        let e = s
            .apply(&Command::attach_child("nope", "retry", 0, vec![0]))
            .unwrap_err();
        assert!(matches!(e, Refusal::UnknownTopicOrPartition { .. }));
        // Self, second parent, chains both ways, bad offsets, delay over a year.
        let r = fanout_reason(
            s.apply(&Command::attach_child("retry", "retry", 0, vec![0, 0]))
                .unwrap_err(),
        );
        assert!(r.contains("own child"), "{r}");
        let r = fanout_reason(
            s.apply(&Command::attach_child("retry", "audit", 0, vec![0, 0]))
                .unwrap_err(),
        );
        assert!(r.contains("one parent per child"), "{r}");
        let r = fanout_reason(
            s.apply(&Command::attach_child("audit", "x", 0, vec![0; 4]))
                .unwrap_err(),
        );
        assert!(r.contains("no chains"), "{r}");
        let r = fanout_reason(
            s.apply(&Command::attach_child("x", "orders", 0, vec![0]))
                .unwrap_err(),
        );
        assert!(r.contains("no chains"), "{r}");
        let r = fanout_reason(
            s.apply(&Command::attach_child("orders", "retry", 0, vec![0]))
                .unwrap_err(),
        );
        assert!(r.contains("attach offsets"), "{r}");
        let r = fanout_reason(
            s.apply(&Command::attach_child(
                "orders",
                "retry",
                MAX_FANOUT_DELAY_MS + 1,
                vec![0, 0],
            ))
            .unwrap_err(),
        );
        assert!(r.contains("one year"), "{r}");
        let bad_epoch = Command::AttachChild {
            parent: "orders".into(),
            child: "retry".into(),
            delay_ms: 0,
            epoch: "xyz".into(),
            attach_offsets: vec![0, 0],
        };
        assert!(fanout_reason(s.apply(&bad_epoch).unwrap_err()).contains("epoch"));
        s.apply(&Command::attach_child(
            "orders",
            "retry",
            MAX_FANOUT_DELAY_MS,
            vec![0, 0],
        ))
        .unwrap();
        // Detach: wrong parent refused, right parent removes only that link.
        let r = fanout_reason(
            s.apply(&Command::DetachChild {
                parent: "x".into(),
                child: "audit".into(),
            })
            .unwrap_err(),
        );
        assert!(r.contains("not attached"), "{r}");
        let ch = s
            .apply(&Command::DetachChild {
                parent: "orders".into(),
                child: "audit".into(),
            })
            .unwrap();
        assert!(matches!(ch, Change::ChildDetached { .. }));
        assert!(s.fanout_links.of_child("audit").is_none());
        assert!(s.fanout_links.of_child("retry").is_some());
        // Re-attach is a fresh epoch.
        let e1 = link.epoch;
        let Change::ChildAttached { link } = s
            .apply(&Command::attach_child("orders", "audit", 0, vec![9, 9]))
            .unwrap()
        else {
            panic!()
        };
        assert_ne!(link.epoch, e1);
        assert_eq!(s.check_invariants(), Ok(()));
    }

    #[test]
    fn fanout_children_cap() {
        let mut s = MetaState::default();
        topics(&mut s, &[("p", 1)]);
        for i in 0..=MAX_FANOUT_CHILDREN_PER_PARENT {
            let c = format!("c{i}");
            topics(&mut s, &[(c.as_str(), 1)]);
            let r = s.apply(&Command::attach_child("p", c, 0, vec![0]));
            if i < MAX_FANOUT_CHILDREN_PER_PARENT {
                r.unwrap();
            } else {
                assert!(fanout_reason(r.unwrap_err()).contains("at most 108"));
            }
        }
    }

    #[test]
    fn fanout_retention_floor() {
        let hour = FANOUT_RETENTION_MARGIN_MS;
        let mut s = MetaState::default();
        topics(&mut s, &[("p", 1), ("d", 1), ("n", 1)]);
        let set = |v: &str| Command::AlterConfigs {
            name: "p".into(),
            set: [(RETENTION_MS_CONFIG.to_string(), v.to_string())].into(),
            remove: vec![],
        };
        s.apply(&set(&(2 * hour).to_string())).unwrap();
        // A 2 h delay needs 3 h of parent retention.
        let r = fanout_reason(
            s.apply(&Command::attach_child("p", "d", 2 * hour, vec![0]))
                .unwrap_err(),
        );
        assert!(r.contains("delay + 1 h"), "{r}");
        s.apply(&Command::attach_child("p", "d", hour, vec![0]))
            .unwrap();
        // A child without delay sets no floor.
        s.apply(&Command::attach_child("p", "n", 0, vec![0]))
            .unwrap();
        // Lowering retention below the floor is refused; -1 (forever) and equal pass.
        let e = s.apply(&set(&(2 * hour - 1).to_string())).unwrap_err();
        assert!(matches!(
            e,
            Refusal::InvalidConfig { .. } | Refusal::InvalidFanout { .. }
        ));
        assert_eq!(
            s.topic("p").unwrap().configs[RETENTION_MS_CONFIG],
            (2 * hour).to_string()
        );
        s.apply(&set("-1")).unwrap();
        s.apply(&set(&(2 * hour).to_string())).unwrap();
    }

    #[test]
    fn fanout_follows_delete_and_add_partitions() {
        let mut s = MetaState::default();
        let mut copy = MetaState::default();
        let mut run = |s: &mut MetaState, cmd: Command| {
            let ch = s.apply(&cmd).unwrap();
            assert!(copy.apply_change(&ch), "{ch:?}");
        };
        for (n, p) in [("p", 2), ("c1", 1), ("c2", 3)] {
            run(
                &mut s,
                Command::create_topic(n, p, BTreeMap::new(), a(p as usize)),
            );
        }
        run(&mut s, Command::attach_child("p", "c1", 0, vec![3, 4]));
        run(&mut s, Command::attach_child("p", "c2", 10, vec![3, 4]));
        run(
            &mut s,
            Command::AddPartitions {
                name: "p".into(),
                new_total: 4,
                assignments: a(2),
            },
        );
        assert_eq!(
            s.fanout_links.of_child("c1").unwrap().attach_offsets,
            vec![3, 4, 0, 0]
        );
        run(&mut s, Command::DeleteTopic { name: "c1".into() });
        assert!(s.fanout_links.of_child("c1").is_none());
        assert!(s.fanout_links.of_child("c2").is_some());
        run(&mut s, Command::DeleteTopic { name: "p".into() });
        assert!(s.fanout_links.links.is_empty());
        assert_eq!(s, copy);
        assert_eq!(s.check_invariants(), Ok(()));
    }

    /// Raft log entries written before fan-out existed must still decode: the new command
    /// variants may not grow the archived `Command`.
    #[test]
    fn archived_command_size_unchanged() {
        assert_eq!(std::mem::size_of::<ArchivedCommand>(), 56);
    }

    /// AlterClientQuota sets and removes keys; an entity left without keys is gone; bad keys,
    /// values and entities are refused; a subscriber's copy follows.
    #[test]
    fn client_quotas_alter_and_follow() {
        let mut s = MetaState::default();
        let mut copy = s.clone();
        let entity = QuotaEntity {
            user: QuotaPart::Absent,
            client_id: QuotaPart::Named("slow".into()),
        };
        let alter = |set: &[(&str, f64)], remove: &[&str]| Command::AlterClientQuota {
            alter: Box::new(QuotaAlteration {
                entity: entity.clone(),
                set: set
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_bits()))
                    .collect(),
                remove: remove.iter().map(|k| k.to_string()).collect(),
            }),
        };
        let c = s
            .apply(&alter(
                &[
                    ("producer_byte_rate", 1048576.0),
                    ("request_percentage", 50.0),
                ],
                &[],
            ))
            .unwrap();
        assert!(copy.apply_change(&c));
        assert_eq!(s.client_quotas.len(), 1);
        assert_eq!(
            s.client_quotas[0].value("producer_byte_rate"),
            Some(1048576.0)
        );
        let c = s.apply(&alter(&[], &["request_percentage"])).unwrap();
        assert!(copy.apply_change(&c));
        assert_eq!(s.client_quotas[0].value("request_percentage"), None);
        assert_eq!(s, copy);
        for bad in [
            alter(&[("bytes_per_fortnight", 1.0)], &[]),
            alter(&[("producer_byte_rate", 0.0)], &[]),
            alter(&[("producer_byte_rate", f64::NAN)], &[]),
            Command::AlterClientQuota {
                alter: Box::new(QuotaAlteration {
                    entity: QuotaEntity {
                        user: QuotaPart::Absent,
                        client_id: QuotaPart::Absent,
                    },
                    set: BTreeMap::new(),
                    remove: vec![],
                }),
            },
        ] {
            assert!(
                matches!(s.apply(&bad), Err(Refusal::InvalidQuota { .. })),
                "{bad:?}"
            );
        }
        let c = s.apply(&alter(&[], &["producer_byte_rate"])).unwrap();
        assert!(copy.apply_change(&c));
        assert!(s.client_quotas.is_empty());
        assert_eq!(s, copy);
        assert_eq!(s.check_invariants(), Ok(()));
    }

    /// Applies `cmd` to `s` and the resulting change to `copy` (a subscriber's copy).
    fn both(s: &mut MetaState, copy: &mut MetaState, cmd: &Command) -> Result<Change, Refusal> {
        let ch = s.apply(cmd)?;
        assert!(copy.apply_change(&ch), "{ch:?}");
        Ok(ch)
    }

    fn barrier_refusal(r: Result<Change, Refusal>) -> String {
        match r {
            Err(e @ Refusal::InvalidBarrierGroup { .. }) => e.to_string(),
            other => panic!("expected InvalidBarrierGroup, got {other:?}"),
        }
    }

    /// Define creates a group (topics sorted, each once), define again replaces it, delete
    /// removes it; deleting an unknown group is refused; the copy follows.
    #[test]
    fn barrier_groups_define_replace_delete() {
        let mut s = MetaState::default();
        let mut copy = MetaState::default();
        for (n, p) in [("a", 1u32), ("b", 2), ("c", 3)] {
            both(
                &mut s,
                &mut copy,
                &Command::create_topic(n, p, BTreeMap::new(), a(p as usize)),
            )
            .unwrap();
        }
        let ch = both(
            &mut s,
            &mut copy,
            &Command::define_barrier_group("g", ["b", "a", "b"], 5_000, 10),
        )
        .unwrap();
        let want = BarrierGroupDef {
            name: "g".into(),
            topics: vec!["a".into(), "b".into()],
            interval_ms: 5_000,
            retained_cuts: 10,
        };
        assert_eq!(ch, Change::BarrierGroupDefined { def: want.clone() });
        assert_eq!(s.barrier_group("g"), Some(&want));
        assert_eq!(
            s.barrier_groups
                .groups_of_topic("b")
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>(),
            ["g"]
        );
        assert_eq!(s.barrier_groups.groups_of_topic("c").count(), 0);
        // Replace: new topics, interval and retention.
        both(
            &mut s,
            &mut copy,
            &Command::define_barrier_group("g", ["c"], 60_000, 3),
        )
        .unwrap();
        both(
            &mut s,
            &mut copy,
            &Command::define_barrier_group("h", ["a", "c"], 1_000, 1),
        )
        .unwrap();
        assert_eq!(s.barrier_groups.groups.len(), 2);
        let g = s.barrier_group("g").unwrap();
        assert_eq!(
            (g.topics.clone(), g.interval_ms, g.retained_cuts),
            (vec!["c".to_string()], 60_000, 3)
        );
        assert_eq!(s, copy);
        assert_eq!(s.check_invariants(), Ok(()));
        let ch = both(
            &mut s,
            &mut copy,
            &Command::DeleteBarrierGroup { name: "g".into() },
        )
        .unwrap();
        assert_eq!(ch, Change::BarrierGroupDeleted { name: "g".into() });
        assert!(s.barrier_group("g").is_none());
        assert!(s.barrier_group("h").is_some());
        let before = s.clone();
        let e = s
            .apply(&Command::DeleteBarrierGroup { name: "g".into() })
            .unwrap_err();
        assert_eq!(e, Refusal::UnknownBarrierGroup { name: "g".into() });
        assert!(e.to_string().contains("unknown barrier group 'g'"), "{e}");
        assert_eq!(s, before);
        assert_eq!(s, copy);
        // A copy that never saw the group cannot delete it: it is stale.
        let mut stale = MetaState::default();
        assert!(!stale.apply_change(&Change::BarrierGroupDeleted { name: "h".into() }));
        assert_eq!(s.check_invariants(), Ok(()));
    }

    /// Every define rule and limit is refused with `InvalidBarrierGroup` (the state is left
    /// untouched); the bounds themselves are accepted.
    #[test]
    fn barrier_group_limits() {
        let mut s = MetaState::default();
        let names: Vec<String> = (0..=MAX_TOPICS_PER_BARRIER_GROUP)
            .map(|i| format!("t{i:03}"))
            .collect();
        for n in &names {
            s.apply(&Command::create_topic(n.as_str(), 1, BTreeMap::new(), a(1)))
                .unwrap();
        }
        s.apply(&Command::create_topic(
            "__consumer_offsets",
            1,
            BTreeMap::new(),
            a(1),
        ))
        .unwrap();
        let before = s.clone();
        let def = |name: &str, topics: &[&str], interval_ms: u64, retained_cuts: u32| {
            Command::define_barrier_group(name, topics.iter().copied(), interval_ms, retained_cuts)
        };
        let long = "n".repeat(MAX_BARRIER_GROUP_NAME_BYTES + 1);
        for (cmd, want) in [
            (def("", &["t000"], 5_000, 1), "name is empty"),
            (
                def(&long, &["t000"], 5_000, 1),
                "MAX_BARRIER_GROUP_NAME_BYTES",
            ),
            (def("a/b", &["t000"], 5_000, 1), "[a-zA-Z0-9._-]"),
            (def("..", &["t000"], 5_000, 1), "'.' and '..'"),
            (def("g", &[], 5_000, 1), "no topics"),
            (def("g", &["nope"], 5_000, 1), "'nope' does not exist"),
            (
                def("g", &["t000", "__consumer_offsets"], 5_000, 1),
                "'__consumer_offsets' is internal",
            ),
            (
                def("g", &["t000"], MIN_BARRIER_INTERVAL_MS - 1, 1),
                "interval_ms 999",
            ),
            (
                def("g", &["t000"], MAX_BARRIER_INTERVAL_MS + 1, 1),
                "interval_ms 604800001",
            ),
            (def("g", &["t000"], 5_000, 0), "retained_cuts 0"),
            (
                def("g", &["t000"], 5_000, MAX_RETAINED_CUTS + 1),
                "retained_cuts 10001",
            ),
        ] {
            let r = barrier_refusal(s.apply(&cmd));
            assert!(r.contains(want), "{cmd:?}: {r}");
            assert_eq!(s, before);
        }
        let all: Vec<&str> = names.iter().map(String::as_str).collect();
        let r = barrier_refusal(s.apply(&def("g", &all, 5_000, 1)));
        assert!(r.contains("101 distinct topics"), "{r}");
        // Duplicates are collapsed before the count: 100 distinct topics, named twice, pass.
        let mut twice = all[..MAX_TOPICS_PER_BARRIER_GROUP].to_vec();
        twice.extend_from_slice(&all[..MAX_TOPICS_PER_BARRIER_GROUP]);
        s.apply(&def("g", &twice, 5_000, 1)).unwrap();
        assert_eq!(
            s.barrier_group("g").unwrap().topics.len(),
            MAX_TOPICS_PER_BARRIER_GROUP
        );
        // The bounds themselves.
        let longest = "n".repeat(MAX_BARRIER_GROUP_NAME_BYTES);
        s.apply(&def(&longest, &["t000"], MIN_BARRIER_INTERVAL_MS, 1))
            .unwrap();
        s.apply(&def(
            "g.x-Y_1",
            &["t000"],
            MAX_BARRIER_INTERVAL_MS,
            MAX_RETAINED_CUTS,
        ))
        .unwrap();
        // At most MAX_BARRIER_GROUPS groups; replacing one at the cap is fine.
        for i in s.barrier_groups.groups.len()..MAX_BARRIER_GROUPS {
            s.apply(&def(&format!("g{i}"), &["t001"], 5_000, 1))
                .unwrap();
        }
        assert_eq!(s.barrier_groups.groups.len(), MAX_BARRIER_GROUPS);
        let full = s.clone();
        let r = barrier_refusal(s.apply(&def("one-more", &["t001"], 5_000, 1)));
        assert!(r.contains("100 barrier groups at most"), "{r}");
        assert_eq!(s, full);
        s.apply(&def("g", &["t002"], 5_000, 7)).unwrap();
        assert_eq!(s.barrier_group("g").unwrap().retained_cuts, 7);
        s.apply(&Command::DeleteBarrierGroup { name: "g".into() })
            .unwrap();
        s.apply(&def("one-more", &["t001"], 5_000, 1)).unwrap();
        assert_eq!(s.check_invariants(), Ok(()));
    }

    /// Deleting a topic takes it out of every group; a group left without topics stays
    /// defined with none; the topic created again is not put back; the copy follows.
    #[test]
    fn topic_deletion_leaves_barrier_groups() {
        let mut s = MetaState::default();
        let mut copy = MetaState::default();
        for n in ["a", "b"] {
            both(
                &mut s,
                &mut copy,
                &Command::create_topic(n, 1, BTreeMap::new(), a(1)),
            )
            .unwrap();
        }
        for (g, t) in [("both", &["a", "b"][..]), ("only-a", &["a"][..])] {
            both(
                &mut s,
                &mut copy,
                &Command::define_barrier_group(g, t.iter().copied(), 5_000, 2),
            )
            .unwrap();
        }
        both(
            &mut s,
            &mut copy,
            &Command::DeleteTopic { name: "a".into() },
        )
        .unwrap();
        assert_eq!(
            s.barrier_group("both").unwrap().topics,
            vec!["b".to_string()]
        );
        assert!(s.barrier_group("only-a").unwrap().topics.is_empty());
        assert_eq!(s, copy);
        assert_eq!(s.check_invariants(), Ok(()));
        both(
            &mut s,
            &mut copy,
            &Command::create_topic("a", 1, BTreeMap::new(), a(1)),
        )
        .unwrap();
        assert!(s.barrier_group("only-a").unwrap().topics.is_empty());
        // The empty group can be redefined or deleted.
        both(
            &mut s,
            &mut copy,
            &Command::define_barrier_group("only-a", ["a"], 5_000, 2),
        )
        .unwrap();
        both(
            &mut s,
            &mut copy,
            &Command::DeleteBarrierGroup {
                name: "both".into(),
            },
        )
        .unwrap();
        assert_eq!(s, copy);
        assert_eq!(s.check_invariants(), Ok(()));
    }

    /// A batch of barrier commands (as group commit applies them, refusals left out) gives the
    /// same state on a copy that applies the batch's changes.
    #[test]
    fn barrier_apply_change_mirrors_apply() {
        let mut s = MetaState::default();
        let mut copy = MetaState::default();
        let cmds = [
            Command::create_topic("x", 2, BTreeMap::new(), a(2)),
            Command::create_topic("y", 1, BTreeMap::new(), a(1)),
            Command::define_barrier_group("g1", ["y", "x"], 2_000, 5),
            Command::define_barrier_group("bad", ["zzz"], 2_000, 5),
            Command::define_barrier_group("g2", ["x"], 3_000, 1),
            Command::define_barrier_group("g1", ["y"], 4_000, 6),
            Command::DeleteBarrierGroup { name: "g2".into() },
            Command::DeleteBarrierGroup { name: "g2".into() },
            Command::DeleteTopic { name: "y".into() },
        ];
        let changes: Vec<Change> = cmds.iter().filter_map(|c| s.apply(c).ok()).collect();
        assert_eq!(changes.len(), cmds.len() - 2);
        assert!(copy.apply_change(&Change::Batch(changes)));
        assert_eq!(s, copy);
        assert!(s.barrier_group("g1").unwrap().topics.is_empty());
        assert_eq!(s.check_invariants(), Ok(()));
    }

    /// `check_invariants` catches a broken barrier section.
    #[test]
    fn barrier_invariants() {
        let mut s = MetaState::default();
        for n in ["a", "b"] {
            s.apply(&Command::create_topic(n, 1, BTreeMap::new(), a(1)))
                .unwrap();
        }
        s.apply(&Command::define_barrier_group("g", ["a", "b"], 5_000, 2))
            .unwrap();
        let broken = |f: &dyn Fn(&mut BarrierGroupDef)| {
            let mut t = s.clone();
            f(t.barrier_groups.groups.get_mut("g").unwrap());
            t.check_invariants()
        };
        assert!(broken(&|g| g.name = "h".into()).is_err());
        assert!(broken(&|g| g.topics.reverse()).is_err());
        assert!(broken(&|g| g.topics.push("b".into())).is_err());
        assert!(broken(&|g| g.topics.push("c".into())).is_err());
        assert!(broken(&|g| g.interval_ms = 1).is_err());
        assert!(broken(&|g| g.interval_ms = BARRIER_INTERVAL_OFF_MS).is_ok());
        assert!(broken(&|g| g.retained_cuts = 0).is_err());
        let mut t = s.clone();
        t.barrier_groups.section_version = 1;
        assert!(t.check_invariants().is_err());
        assert_eq!(s.check_invariants(), Ok(()));
    }
}
