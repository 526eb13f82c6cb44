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
mod barriers;
mod brokers;
mod command;
mod fanout;
mod replicas;
mod security;
#[cfg(test)]
mod tests;
mod topics;

pub use barriers::*;
pub use brokers::*;
pub use command::*;
pub use fanout::*;
pub use replicas::*;
pub use security::*;
pub use topics::*;
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
            fanout_links: FanoutLinks::default(),
            barrier_groups: BarrierGroups::default(),
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
}

impl MetaState {
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
