//! Replicated partitions in the metastore (issue #18, the KRaft role): each replicated
//! partition's replicas, its in-sync replicas (ISR), its leader and leader epoch, and the
//! rules that change them, all applied deterministically in `MetaState::apply`:
//!
//! - A topic created with a replication factor above 1 starts with every replica in sync and
//!   the first replica leading, at leader epoch 0.
//! - `AlterIsr` comes from the partition's leader (it shrinks the ISR when a follower lags past
//!   `replica.lag.time.max.ms`, expands it when the follower caught up); it names the leader
//!   epoch and partition epoch it saw, and is refused if either moved since.
//! - When a node is fenced, every partition it leads elects the first live replica of its ISR
//!   (leader epoch + 1); a follower on it leaves the ISR. The ISR never empties: its last
//!   member stays in it, fenced or not, as the one replica known to hold every acknowledged
//!   record (KIP-966's point: no "last replica standing" loss). With no live ISR member the
//!   partition has no leader, unless its topic sets `unclean.leader.election.enable=true`:
//!   then the first live replica leads, and the ISR is just it.
//! - When a node comes back (heartbeat after a fence, or a new registration), every partition
//!   with no leader whose ISR holds it elects it.
//! - A reassignment (KIP-455, `Command::ReassignReplicas`) names a partition's target
//!   replicas, as many as it has or more or fewer (a replication factor change; a topic not
//!   replicated yet first gets replica state for every partition, each owner its only
//!   replica and leader). Until every target replica is in sync the replicas are the
//!   target followed by the original ones it leaves out (`adding`: target nodes new to the
//!   partition, `removing`: original nodes the target leaves out); the new ones copy the
//!   leader's log as any follower and join the ISR once caught up. The `AlterIsr` that makes
//!   the last target replica in sync completes it: the replicas become the target, the ISR
//!   keeps only target nodes, and a leader being removed hands over to the first live
//!   in-sync target replica (leader epoch + 1). A cancel (no target) goes back to the
//!   original replicas at once.
//!
//! The leader's place is also `MetaState::assignments` (what every handler routes by): it is
//! set from the replica entry of the leader's node whenever the leader changes.
//!
//! This module holds the types and their checks; the rules are applied by `MetaState`'s
//! replication methods in `state/replicas.rs` (they change the rest of the state with them).

use rkyv::{Archive, Deserialize, Serialize};

/// Most replicas of one partition.
pub const MAX_REPLICATION_FACTOR: usize = 16;
/// The topic config that allows electing a replica outside the ISR (data loss).
pub const UNCLEAN_LEADER_ELECTION_CONFIG: &str = "unclean.leader.election.enable";

/// Where a partition (or one replica of it) lives: a node and a core (executor) index on
/// that node.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Assignment {
    pub node_id: u64,
    pub core_index: u32,
}

/// One replicated partition's replicas and leadership.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PartitionReplicas {
    /// Every replica, each on its own node, the preferred leader first.
    pub replicas: Vec<Assignment>,
    /// The node ids of the in-sync replicas, in replica order; never empty.
    pub isr: Vec<u64>,
    /// The leader's node; `None`: no eligible replica is live (the partition is offline).
    pub leader: Option<u64>,
    /// Bumped at every leader change; followers fetch at it, batches carry it.
    pub leader_epoch: i32,
    /// Bumped at every change (leader or ISR): an `AlterIsr` names the one it was based on.
    pub partition_epoch: i32,
    /// A reassignment under way: the target's nodes that are new to the partition, in
    /// replica order (empty: none under way).
    pub adding: Vec<u64>,
    /// A reassignment under way: the original nodes the target leaves out.
    pub removing: Vec<u64>,
}

impl PartitionReplicas {
    /// A new partition on `replicas`: all in sync, the first leading, epoch 0.
    pub fn new(replicas: Vec<Assignment>) -> Self {
        let isr = replicas.iter().map(|a| a.node_id).collect();
        let leader = replicas.first().map(|a| a.node_id);
        PartitionReplicas {
            replicas,
            isr,
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            adding: Vec::new(),
            removing: Vec::new(),
        }
    }

    /// Whether a reassignment is under way.
    pub fn reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// The replicas a reassignment under way moves to (all of them when none is).
    pub fn target(&self) -> Vec<Assignment> {
        self.replicas
            .iter()
            .copied()
            .filter(|a| !self.removing.contains(&a.node_id))
            .collect()
    }

    /// The replicas before a reassignment under way (all of them when none is).
    pub fn original(&self) -> Vec<Assignment> {
        self.replicas
            .iter()
            .copied()
            .filter(|a| !self.adding.contains(&a.node_id))
            .collect()
    }

    /// Where the replica of `node` lives.
    pub fn replica_on(&self, node: u64) -> Option<Assignment> {
        self.replicas.iter().copied().find(|a| a.node_id == node)
    }

    /// The leader's place.
    pub fn leader_assignment(&self) -> Option<Assignment> {
        self.leader.and_then(|n| self.replica_on(n))
    }

    pub fn in_sync(&self, node: u64) -> bool {
        self.isr.contains(&node)
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        // A reassignment under way holds the replicas it removes as well.
        let rf = self.replicas.len().saturating_sub(self.removing.len());
        if rf == 0 || rf > MAX_REPLICATION_FACTOR {
            return Err(format!(
                "{} replicas (1 to {MAX_REPLICATION_FACTOR})",
                self.replicas.len()
            ));
        }
        let mut nodes: Vec<u64> = self.replicas.iter().map(|a| a.node_id).collect();
        nodes.sort_unstable();
        nodes.dedup();
        if nodes.len() != self.replicas.len() {
            return Err("two replicas on one node".into());
        }
        if self.isr.is_empty() || self.isr.iter().any(|n| self.replica_on(*n).is_none()) {
            return Err(format!(
                "ISR {:?} is not a non-empty set of replicas",
                self.isr
            ));
        }
        if self.leader.is_some_and(|l| !self.in_sync(l)) {
            return Err(format!("leader {:?} is not in the ISR", self.leader));
        }
        let moving = self.adding.iter().chain(&self.removing);
        if moving.clone().any(|n| self.replica_on(*n).is_none())
            || self.adding.iter().any(|n| self.removing.contains(n))
        {
            return Err(format!(
                "reassignment adding {:?}, removing {:?}: disjoint replicas of the partition",
                self.adding, self.removing
            ));
        }
        Ok(())
    }
}
