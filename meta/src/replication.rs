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
//!
//! The leader's place is also `MetaState::assignments` (what every handler routes by): it is
//! set from the replica entry of the leader's node whenever the leader changes.

use rkyv::{Archive, Deserialize, Serialize};

use crate::state::{Assignment, Change, MetaState, Refusal};

/// Most replicas of one partition.
pub const MAX_REPLICATION_FACTOR: usize = 16;
/// The topic config that allows electing a replica outside the ISR (data loss).
pub const UNCLEAN_LEADER_ELECTION_CONFIG: &str = "unclean.leader.election.enable";

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
        }
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

    fn check(&self) -> Result<(), String> {
        if self.replicas.is_empty() || self.replicas.len() > MAX_REPLICATION_FACTOR {
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
        Ok(())
    }
}

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
            .map_or(1, |r| r.replicas.len())
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
            if let Some(l) = r.leader_assignment() {
                a[p] = l;
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
        next.check().map_err(refuse)?;
        self.set_replicas(name, partition, std::slice::from_ref(&next));
        Ok(Change::ReplicasSet {
            name: name.to_string(),
            first_partition: partition,
            replicas: vec![next],
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{BrokerRegistration, Command, NewReplicatedTopic};

    fn register(s: &mut MetaState, node: u64) {
        s.apply(&Command::RegisterBroker {
            broker: Box::new(BrokerRegistration {
                node_id: node,
                host: "127.0.0.1".into(),
                port: 9000 + node as u16,
                core_ports: vec![],
                cores: 2,
                rack: None,
                incarnation: node,
                fenced: false,
            }),
        })
        .unwrap();
    }

    fn a(node: u64, core: u32) -> Assignment {
        Assignment {
            node_id: node,
            core_index: core,
        }
    }

    fn fence(s: &mut MetaState, node: u64) -> Result<Change, Refusal> {
        s.apply(&Command::FenceBroker {
            node_id: node,
            incarnation: node,
        })
    }

    fn create(s: &mut MetaState, name: &str, replicas: Vec<Vec<Assignment>>, unclean: bool) {
        let configs = if unclean {
            [(
                UNCLEAN_LEADER_ELECTION_CONFIG.to_string(),
                "true".to_string(),
            )]
            .into()
        } else {
            Default::default()
        };
        s.apply(&Command::CreateReplicatedTopic {
            topic: Box::new(NewReplicatedTopic {
                name: name.into(),
                partitions: replicas.len() as u32,
                configs,
                replicas,
                incarnation_id: "0123456789abcdef".into(),
                topic_id: [1; 16],
            }),
        })
        .unwrap();
    }

    /// Elections follow the ISR: a fenced leader is replaced by the next live in-sync
    /// replica at a new epoch, the ISR never empties, a partition with no live in-sync
    /// replica has no leader until one comes back, and a subscriber's copy that applies the
    /// changes ends where the metastore does.
    #[test]
    fn leaders_are_elected_from_the_isr_and_copies_follow() {
        let mut s = MetaState::default();
        for n in 1..=5 {
            register(&mut s, n);
        }
        let mut copy = s.clone();
        create(
            &mut s,
            "t",
            vec![
                vec![a(1, 0), a(2, 1), a(3, 0)],
                vec![a(2, 0), a(3, 1), a(1, 1)],
            ],
            false,
        );
        let r = s.replica_set("t", 0).unwrap().clone();
        assert_eq!(
            (r.leader, r.isr.clone(), r.leader_epoch),
            (Some(1), vec![1, 2, 3], 0)
        );
        assert_eq!(s.assignment("t", 1), Some(a(2, 0)));
        // Two replicas on one node, or mixed replication factors, are refused.
        for bad in [
            vec![vec![a(1, 0), a(1, 1)]],
            vec![vec![a(1, 0), a(2, 0)], vec![a(1, 0)]],
        ] {
            let refused = s.apply(&Command::CreateReplicatedTopic {
                topic: Box::new(NewReplicatedTopic {
                    name: "bad".into(),
                    partitions: bad.len() as u32,
                    configs: Default::default(),
                    replicas: bad,
                    incarnation_id: "0123456789abcdef".into(),
                    topic_id: [2; 16],
                }),
            });
            assert!(matches!(refused, Err(Refusal::InvalidAssignment { .. })));
        }

        // The leader of partition 0 goes: node 2 leads at epoch 1; node 1 leaves the ISR of
        // both partitions.
        fence(&mut s, 1).unwrap();
        let r = s.replica_set("t", 0).unwrap().clone();
        assert_eq!(
            (r.leader, r.isr.clone(), r.leader_epoch),
            (Some(2), vec![2, 3], 1)
        );
        assert_eq!(s.assignment("t", 0), Some(a(2, 1)));
        let r1 = s.replica_set("t", 1).unwrap().clone();
        assert_eq!(
            (r1.leader, r1.isr.clone(), r1.leader_epoch),
            (Some(2), vec![2, 3], 0)
        );

        // An ISR change at a stale epoch is refused; the leader's current one is taken.
        let stale = s.apply(&Command::AlterIsr {
            name: "t".into(),
            partition: 0,
            leader_epoch: 0,
            partition_epoch: r.partition_epoch,
            isr: vec![2],
        });
        assert!(stale.is_err());
        let no_leader = s.apply(&Command::AlterIsr {
            name: "t".into(),
            partition: 0,
            leader_epoch: 1,
            partition_epoch: r.partition_epoch,
            isr: vec![3],
        });
        assert!(no_leader.is_err(), "the ISR keeps its leader");
        s.apply(&Command::AlterIsr {
            name: "t".into(),
            partition: 0,
            leader_epoch: 1,
            partition_epoch: r.partition_epoch,
            isr: vec![2],
        })
        .unwrap();
        // Node 2, the only ISR member, goes: no leader (node 3 is behind), the ISR keeps 2.
        fence(&mut s, 2).unwrap();
        let r = s.replica_set("t", 0).unwrap().clone();
        assert_eq!(
            (r.leader, r.isr.clone(), r.leader_epoch),
            (None, vec![2], 2)
        );
        assert_eq!(s.replica_set("t", 1).unwrap().leader, Some(3));
        // It comes back: it leads again.
        s.apply(&Command::BrokerHeartbeat {
            node_id: 2,
            incarnation: 2,
        })
        .unwrap();
        let r = s.replica_set("t", 0).unwrap().clone();
        assert_eq!((r.leader, r.leader_epoch), (Some(2), 3));
        assert_eq!(s.assignment("t", 0), Some(a(2, 1)));
        s.check_invariants().unwrap();

        // A subscriber's copy that applies every change agrees.
        let mut t = MetaState::default();
        for n in 1..=5 {
            register(&mut t, n);
        }
        assert_eq!(copy, t);
        let mut replay = t.clone();
        let cmds = [
            Command::CreateReplicatedTopic {
                topic: Box::new(NewReplicatedTopic {
                    name: "u".into(),
                    partitions: 1,
                    configs: Default::default(),
                    replicas: vec![vec![a(4, 0), a(5, 0)]],
                    incarnation_id: "0123456789abcdef".into(),
                    topic_id: [3; 16],
                }),
            },
            Command::FenceBroker {
                node_id: 4,
                incarnation: 4,
            },
        ];
        for c in &cmds {
            let change = replay.apply(c).unwrap();
            assert!(copy.apply_change(&change));
        }
        assert_eq!(copy, replay);
        assert_eq!(replay.replica_set("u", 0).unwrap().leader, Some(5));
    }

    /// A node that registers again with a new incarnation (a restart) loses what it led and
    /// leaves the ISR, as at a fence; the same incarnation again changes nothing.
    #[test]
    fn a_restarted_leader_hands_its_partitions_over() {
        let mut s = MetaState::default();
        for n in 1..=3 {
            register(&mut s, n);
        }
        create(&mut s, "t", vec![vec![a(1, 0), a(2, 0), a(3, 0)]], false);
        register(&mut s, 1);
        assert_eq!(
            s.replica_set("t", 0).unwrap().leader_epoch,
            0,
            "same incarnation"
        );
        let mut again = s.brokers[&1].clone();
        again.incarnation = 99;
        s.apply(&Command::RegisterBroker {
            broker: Box::new(again),
        })
        .unwrap();
        let r = s.replica_set("t", 0).unwrap().clone();
        assert_eq!(
            (r.leader, r.isr.clone(), r.leader_epoch),
            (Some(2), vec![2, 3], 1)
        );
        assert!(!s.brokers[&1].fenced);
        s.check_invariants().unwrap();
    }

    /// With `unclean.leader.election.enable=true` a partition whose in-sync replicas are all
    /// gone elects a live replica outside the ISR.
    #[test]
    fn unclean_election_is_a_topic_config() {
        let mut s = MetaState::default();
        for n in 1..=5 {
            register(&mut s, n);
        }
        create(&mut s, "t", vec![vec![a(1, 0), a(2, 0), a(3, 0)]], true);
        let r = s.replica_set("t", 0).unwrap().clone();
        s.apply(&Command::AlterIsr {
            name: "t".into(),
            partition: 0,
            leader_epoch: 0,
            partition_epoch: r.partition_epoch,
            isr: vec![1],
        })
        .unwrap();
        fence(&mut s, 1).unwrap();
        let r = s.replica_set("t", 0).unwrap().clone();
        assert_eq!((r.leader, r.isr.clone()), (Some(2), vec![2]));
        s.check_invariants().unwrap();
    }
}
