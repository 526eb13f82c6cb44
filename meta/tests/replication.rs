//! The metastore's replicated partitions (issue #18): placements checked, leaders elected from
//! the ISR on fence, return and restart, stale ISR changes refused, unclean election as a
//! topic config, and a subscriber's copy that applies the changes agreeing.

use meta::replication::UNCLEAN_LEADER_ELECTION_CONFIG;
use meta::state::{
    Assignment, BrokerRegistration, Change, Command, MetaState, NewReplicatedTopic, Refusal,
};

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

fn reassign(
    s: &mut MetaState,
    name: &str,
    target: Option<Vec<Assignment>>,
) -> Result<Change, Refusal> {
    s.apply(&Command::ReassignReplicas {
        name: name.into(),
        partition: 0,
        target,
    })
}

/// The leader's `AlterIsr` of `name`/0 to `isr`, at the epochs it reads now.
fn alter_isr(s: &mut MetaState, name: &str, isr: Vec<u64>) -> Result<Change, Refusal> {
    let r = s.replica_set(name, 0).unwrap().clone();
    s.apply(&Command::AlterIsr {
        name: name.into(),
        partition: 0,
        leader_epoch: r.leader_epoch,
        partition_epoch: r.partition_epoch,
        isr,
    })
}

/// A reassignment (KIP-455) adds the target's new replicas beside the original ones; the
/// `AlterIsr` that makes the last of them in sync completes it, and a removed leader hands
/// over at a new epoch. A cancel goes back to the original replicas; bad targets are
/// refused; a subscriber's copy follows; the state survives a snapshot's checks.
#[test]
fn a_reassignment_adds_replicas_then_drops_the_old_ones_once_the_new_are_in_sync() {
    let mut s = MetaState::default();
    for n in 1..=5 {
        register(&mut s, n);
    }
    create(&mut s, "t", vec![vec![a(1, 0), a(2, 0), a(3, 0)]], false);
    let mut copy = s.clone();
    let mut changes = Vec::new();

    // Move the leader's replica (node 1) and node 2's to nodes 4 and 5.
    let ch = reassign(&mut s, "t", Some(vec![a(4, 1), a(5, 0), a(3, 0)])).unwrap();
    changes.push(ch);
    let r = s.replica_set("t", 0).unwrap().clone();
    assert_eq!(
        r.replicas,
        vec![a(4, 1), a(5, 0), a(3, 0), a(1, 0), a(2, 0)]
    );
    assert_eq!(
        (r.adding.clone(), r.removing.clone()),
        (vec![4, 5], vec![1, 2])
    );
    assert_eq!(
        (r.leader, r.isr.clone(), r.leader_epoch),
        (Some(1), vec![3, 1, 2], 0)
    );
    assert_eq!(r.target(), vec![a(4, 1), a(5, 0), a(3, 0)]);
    assert_eq!(r.original(), vec![a(3, 0), a(1, 0), a(2, 0)]);
    // Node 4 catches up: still under way.
    changes.push(alter_isr(&mut s, "t", vec![4, 3, 1, 2]).unwrap());
    assert!(s.replica_set("t", 0).unwrap().reassigning());
    // Node 5 too: done. Node 1 led: the first live in-sync target replica (4) leads.
    changes.push(alter_isr(&mut s, "t", vec![4, 5, 3, 1, 2]).unwrap());
    let r = s.replica_set("t", 0).unwrap().clone();
    assert!(!r.reassigning());
    assert_eq!(r.replicas, vec![a(4, 1), a(5, 0), a(3, 0)]);
    assert_eq!(
        (r.leader, r.isr.clone(), r.leader_epoch),
        (Some(4), vec![4, 5, 3], 1)
    );
    assert_eq!(s.assignment("t", 0), Some(a(4, 1)));
    assert_eq!(s.check_invariants(), Ok(()));

    // Refused: two replicas on a node, an unregistered node, a core move of a replica, and
    // a cancel with none under way (a replication factor change is allowed: see
    // `a_reassignment_changes_the_replication_factor`).
    for bad in [
        vec![a(4, 1), a(4, 0), a(3, 0)],
        vec![a(4, 1), a(9, 0), a(3, 0)],
        vec![a(4, 0), a(5, 0), a(3, 0)],
    ] {
        let e = reassign(&mut s, "t", Some(bad.clone())).unwrap_err();
        assert!(
            matches!(e, Refusal::InvalidAssignment { .. }),
            "{bad:?}: {e}"
        );
    }
    let e = reassign(&mut s, "t", None).unwrap_err();
    assert!(matches!(e, Refusal::NoReassignmentInProgress { .. }), "{e}");

    // Start one (node 1 instead of 5), then cancel it: the original replicas at once (in
    // the order they stand, as Kafka's), node 1 out of the ISR it had joined.
    changes.push(reassign(&mut s, "t", Some(vec![a(4, 1), a(1, 0), a(3, 0)])).unwrap());
    changes.push(alter_isr(&mut s, "t", vec![4, 5, 3]).unwrap());
    changes.push(reassign(&mut s, "t", None).unwrap());
    let r = s.replica_set("t", 0).unwrap().clone();
    assert!(!r.reassigning());
    assert_eq!(r.replicas, vec![a(4, 1), a(3, 0), a(5, 0)]);
    assert_eq!(
        (r.leader, r.isr.clone(), r.leader_epoch),
        (Some(4), vec![4, 3, 5], 1)
    );

    // A target whose replicas are all in sync already (a new preferred order) completes at
    // once, and a fenced leader of a reassignment under way is replaced from the ISR.
    changes.push(reassign(&mut s, "t", Some(vec![a(3, 0), a(4, 1), a(5, 0)])).unwrap());
    let r = s.replica_set("t", 0).unwrap().clone();
    assert!(!r.reassigning());
    assert_eq!(r.replicas, vec![a(3, 0), a(4, 1), a(5, 0)]);
    changes.push(reassign(&mut s, "t", Some(vec![a(3, 0), a(2, 1), a(5, 0)])).unwrap());
    changes.push(fence(&mut s, 4).unwrap());
    let r = s.replica_set("t", 0).unwrap().clone();
    assert!(r.reassigning());
    assert_eq!((r.leader, r.leader_epoch), (Some(3), 2));
    changes.push(alter_isr(&mut s, "t", vec![3, 2, 5]).unwrap());
    let r = s.replica_set("t", 0).unwrap().clone();
    assert_eq!(r.replicas, vec![a(3, 0), a(2, 1), a(5, 0)]);
    assert_eq!((r.leader, r.isr.clone()), (Some(3), vec![3, 2, 5]));
    assert_eq!(s.check_invariants(), Ok(()));

    // The copy that applies every change agrees.
    for ch in &changes {
        assert!(copy.apply_change(ch), "{ch:?}");
    }
    assert_eq!(copy.replicas, s.replicas);
    assert_eq!(copy.assignments["t"], s.assignments["t"]);
}

fn elect(s: &mut MetaState, name: &str, unclean: bool) -> Result<Change, Refusal> {
    s.apply(&Command::ElectLeader {
        name: name.into(),
        partition: 0,
        unclean,
    })
}

/// ElectLeaders (KIP-460): a preferred election moves leadership back to the first replica
/// once it is live and in sync, at a new epoch, and is refused when it cannot (not live,
/// not in sync) or is not needed; an unclean one gives a leaderless partition a live
/// replica outside the ISR, and is not needed while one leads.
#[test]
fn preferred_and_unclean_elections_move_leadership_as_asked() {
    let mut s = MetaState::default();
    for n in 1..=3 {
        register(&mut s, n);
    }
    create(&mut s, "t", vec![vec![a(1, 0), a(2, 0), a(3, 0)]], false);
    assert!(matches!(
        elect(&mut s, "t", false),
        Err(Refusal::ElectionNotNeeded { .. })
    ));
    fence(&mut s, 1).unwrap();
    let r = s.replica_set("t", 0).unwrap().clone();
    assert_eq!((r.leader, r.leader_epoch), (Some(2), 1));
    assert!(matches!(
        elect(&mut s, "t", false),
        Err(Refusal::PreferredLeaderNotAvailable { .. })
    ));
    // Back, but outside the ISR (a fenced follower leaves it) until it catches up.
    register(&mut s, 1);
    let r = s.replica_set("t", 0).unwrap().clone();
    if !r.in_sync(1) {
        let refused = elect(&mut s, "t", false).unwrap_err();
        assert!(refused.to_string().contains("not in the ISR"), "{refused}");
        alter_isr(&mut s, "t", vec![2, 3, 1]).unwrap();
    }
    let epoch = s.replica_set("t", 0).unwrap().leader_epoch;
    elect(&mut s, "t", false).unwrap();
    let r = s.replica_set("t", 0).unwrap().clone();
    assert_eq!((r.leader, r.leader_epoch), (Some(1), epoch + 1));
    assert_eq!(
        s.assignments["t"][0].node_id, 1,
        "clients route to the new leader"
    );
    s.check_invariants().unwrap();

    // Unclean: not needed while a replica leads; elects outside the ISR when none can.
    assert!(matches!(
        elect(&mut s, "t", true),
        Err(Refusal::ElectionNotNeeded { .. })
    ));
    alter_isr(&mut s, "t", vec![1]).unwrap();
    fence(&mut s, 1).unwrap();
    let r = s.replica_set("t", 0).unwrap().clone();
    assert_eq!(
        r.leader, None,
        "no in-sync replica left, unclean election off"
    );
    elect(&mut s, "t", true).unwrap();
    let r = s.replica_set("t", 0).unwrap().clone();
    assert_eq!((r.leader, r.isr.clone()), (Some(2), vec![2]));
    s.check_invariants().unwrap();
    // A partition not replicated needs no election; an unknown one is unknown.
    assert!(matches!(
        elect(&mut s, "nope", false),
        Err(Refusal::UnknownTopicOrPartition { .. })
    ));
}

/// An auto leader rebalance elects the preferred replicas of a node whose share of
/// partitions it prefers but does not lead is over the percentage, once it is live and in
/// sync; a partition under reassignment waits.
#[test]
fn an_auto_leader_rebalance_returns_leadership_to_preferred_replicas() {
    let mut s = MetaState::default();
    for n in 1..=3 {
        register(&mut s, n);
    }
    let parts: Vec<Vec<Assignment>> = (0..10)
        .map(|i| {
            let first = 1 + (i % 3) as u64;
            (0..3).map(|k| a(1 + (first - 1 + k) % 3, 0)).collect()
        })
        .collect();
    create(&mut s, "t", parts, false);
    assert!(s.preferred_elections_due(10, 100).is_empty(), "balanced");
    // Node 1 (preferred for partitions 0, 3, 6, 9) fails over and comes back.
    fence(&mut s, 1).unwrap();
    register(&mut s, 1);
    assert!(
        s.preferred_elections_due(10, 100).is_empty(),
        "node 1 is not in sync yet"
    );
    for p in [0u32, 3, 6, 9] {
        let r = s.replica_set("t", p).unwrap().clone();
        let mut isr = r.isr.clone();
        isr.push(1);
        s.apply(&Command::AlterIsr {
            name: "t".into(),
            partition: p,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            isr,
        })
        .unwrap();
    }
    let due = s.preferred_elections_due(10, 100);
    assert_eq!(
        due,
        [0u32, 3, 6, 9].map(|p| ("t".to_string(), p)).to_vec(),
        "4 of 4 not led: over 10%"
    );
    assert_eq!(s.preferred_elections_due(10, 2).len(), 2, "at most max");
    assert!(
        s.preferred_elections_due(100, 100).is_empty(),
        "100%: never over"
    );
    // One under reassignment waits.
    register(&mut s, 4);
    s.apply(&Command::ReassignReplicas {
        name: "t".into(),
        partition: 0,
        target: Some(vec![a(1, 0), a(2, 0), a(4, 0)]),
    })
    .unwrap();
    assert!(s.replica_set("t", 0).unwrap().reassigning());
    let due = s.preferred_elections_due(10, 100);
    assert!(!due.contains(&("t".to_string(), 0)), "{due:?}");
    for (name, partition) in s.preferred_elections_due(10, 100) {
        s.apply(&Command::ElectLeader {
            name,
            partition,
            unclean: false,
        })
        .unwrap();
    }
    for p in [3u32, 6, 9] {
        assert_eq!(s.replica_set("t", p).unwrap().leader, Some(1));
    }
    s.check_invariants().unwrap();
}

/// A replica moves between cores of its node (`MoveReplicaCore`): a leader's move is a new
/// leader epoch and clients route to its new core; a follower's is not; bad moves are
/// refused.
#[test]
fn a_replica_moves_between_the_cores_of_its_node() {
    let mut s = MetaState::default();
    for n in 1..=3 {
        register(&mut s, n);
    }
    create(&mut s, "t", vec![vec![a(1, 0), a(2, 0), a(3, 0)]], false);
    let mv = |s: &mut MetaState, node: u64, core: u32| {
        s.apply(&Command::MoveReplicaCore {
            name: "t".into(),
            partition: 0,
            node_id: node,
            core_index: core,
        })
    };
    mv(&mut s, 1, 1).unwrap();
    let r = s.replica_set("t", 0).unwrap().clone();
    assert_eq!(
        (r.replicas[0], r.leader, r.leader_epoch),
        (a(1, 1), Some(1), 1)
    );
    assert_eq!(
        s.assignments["t"][0],
        a(1, 1),
        "clients route to the new core"
    );
    mv(&mut s, 2, 1).unwrap();
    let r = s.replica_set("t", 0).unwrap().clone();
    assert_eq!(
        (r.replicas[1], r.leader_epoch),
        (a(2, 1), 1),
        "a follower's move keeps the epoch"
    );
    assert!(mv(&mut s, 2, 1).is_err(), "already there");
    assert!(mv(&mut s, 2, 2)
        .unwrap_err()
        .to_string()
        .contains("no core 2"));
    register(&mut s, 4);
    assert!(mv(&mut s, 4, 0)
        .unwrap_err()
        .to_string()
        .contains("holds no replica"));
    s.check_invariants().unwrap();
}

/// A reassignment may change the replication factor: a topic not replicated becomes one (each
/// partition's owner its only replica and leader, the reassigned one growing from there, in
/// one change a subscriber's copy follows), and a replicated partition shrinks once its
/// target is in sync; a cancel of the growth leaves the topic replicated at one replica.
#[test]
fn a_reassignment_changes_the_replication_factor() {
    let mut s = MetaState::default();
    for n in 1..=3 {
        register(&mut s, n);
    }
    s.apply(&Command::CreateTopic {
        name: "u".into(),
        partitions: 2,
        configs: Default::default(),
        assignments: vec![a(1, 0), a(2, 1)],
        incarnation_id: "0123456789abcdef".into(),
        topic_id: [2; 16],
    })
    .unwrap();
    let mut copy = s.clone();
    assert!(matches!(
        reassign(&mut s, "u", None),
        Err(Refusal::NoReassignmentInProgress { .. })
    ));
    let ch = reassign(&mut s, "u", Some(vec![a(1, 0), a(2, 0), a(3, 0)])).unwrap();
    copy.apply_change(&ch);
    let r0 = s.replica_set("u", 0).unwrap().clone();
    assert_eq!(
        (r0.replicas.clone(), r0.isr.clone(), r0.leader),
        (vec![a(1, 0), a(2, 0), a(3, 0)], vec![1], Some(1))
    );
    assert_eq!(
        (r0.adding.clone(), r0.removing.clone()),
        (vec![2, 3], vec![])
    );
    let r1 = s.replica_set("u", 1).unwrap().clone();
    assert_eq!((r1.replicas.clone(), r1.leader), (vec![a(2, 1)], Some(2)));
    assert_eq!(copy, s, "a subscriber's copy follows");
    s.check_invariants().unwrap();
    // The new replicas catch up: the growth completes.
    alter_isr(&mut s, "u", vec![1, 2]).unwrap();
    assert!(s.replica_set("u", 0).unwrap().reassigning());
    alter_isr(&mut s, "u", vec![1, 2, 3]).unwrap();
    let r0 = s.replica_set("u", 0).unwrap().clone();
    assert!(!r0.reassigning());
    assert_eq!(r0.replicas.len(), 3);
    // Shrinking without the leader completes at once (the rest are in sync); it hands over.
    reassign(&mut s, "u", Some(vec![a(3, 0), a(2, 0)])).unwrap();
    let r0 = s.replica_set("u", 0).unwrap().clone();
    assert_eq!(
        (
            r0.replicas.clone(),
            r0.isr.clone(),
            r0.leader,
            r0.leader_epoch
        ),
        (vec![a(3, 0), a(2, 0)], vec![3, 2], Some(3), 1)
    );
    s.check_invariants().unwrap();
    // Down to one replica: partitions added later to the (replicated) topic get replica
    // state too.
    reassign(&mut s, "u", Some(vec![a(2, 0)])).unwrap();
    assert_eq!(s.replication_factor("u"), 1);
    s.apply(&Command::AddPartitions {
        name: "u".into(),
        new_total: 3,
        assignments: vec![a(1, 0)],
    })
    .unwrap();
    assert_eq!(s.replica_set("u", 2).unwrap().replicas, vec![a(1, 0)]);
    s.check_invariants().unwrap();
    // A core move of a leaderless partition's replica keeps clients' route on a replica.
    fence(&mut s, 2).unwrap();
    assert_eq!(s.replica_set("u", 0).unwrap().leader, None);
    s.apply(&Command::MoveReplicaCore {
        name: "u".into(),
        partition: 0,
        node_id: 2,
        core_index: 1,
    })
    .unwrap();
    assert_eq!(s.assignment("u", 0), Some(a(2, 1)));
    s.check_invariants().unwrap();
}
