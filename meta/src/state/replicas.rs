//! Replicated partitions in the state machine: placements, in-sync sets, reassignments
//! and elections (the types and their rules: `crate::replication`).

use std::collections::BTreeMap;

use super::*;

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

    pub(super) fn broker_live(&self, node: u64) -> bool {
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
    pub(super) fn replace_replicas(
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
    pub(super) fn unreplicated_as_replicas(&self, name: &str) -> Option<Vec<PartitionReplicas>> {
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
    pub(super) fn reassignment_can_complete(&self, r: &PartitionReplicas) -> bool {
        let target = r.target();
        let all_in_sync = target.iter().all(|a| r.in_sync(a.node_id));
        let leader_stays = r
            .leader
            .is_none_or(|l| target.iter().any(|a| a.node_id == l));
        all_in_sync && (leader_stays || target.iter().any(|a| self.broker_live(a.node_id)))
    }

    /// Ends a reassignment: the replicas become its target, the ISR keeps target nodes only,
    /// and a removed leader hands over.
    pub(super) fn complete_reassignment(&self, r: &mut PartitionReplicas) {
        r.replicas = r.target();
        r.adding.clear();
        r.removing.clear();
        let replicas = r.replicas.clone();
        r.isr.retain(|n| replicas.iter().any(|a| a.node_id == *n));
        self.elect_if_removed(r);
    }

    /// A leader no longer among `r`'s replicas hands over to the first live in-sync replica
    /// (none: the partition is offline until one comes back), at the next leader epoch.
    pub(super) fn elect_if_removed(&self, r: &mut PartitionReplicas) {
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

    pub(super) fn after_fence(
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

    pub(super) fn after_return(
        &self,
        cur: &PartitionReplicas,
        node: u64,
    ) -> Option<PartitionReplicas> {
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
pub(super) fn with_elections(change: Change, elections: Vec<Change>) -> Change {
    if elections.is_empty() {
        return change;
    }
    let mut all = vec![change];
    all.extend(elections);
    Change::Batch(all)
}
