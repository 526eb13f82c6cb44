//! Three (and four) `ringlog-meta-node` processes on 127.0.0.1: leader failover under a write
//! loop, catch-up of a killed node, a joining learner, and leader-confirmed reads on stale or
//! partitioned nodes.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use meta::{Assignment, MetaError, MetaState};

const CLUSTER_TIMEOUT: Duration = Duration::from_secs(60);
/// Small snapshot interval so that a node that was down catches up through InstallSnapshot.
const SNAPSHOT_FLAGS: &[&str] = &["--snapshot-every", "40", "--keep-logs", "10"];

fn one_assignment() -> Vec<Assignment> {
    vec![Assignment {
        node_id: 1,
        core_index: 0,
    }]
}

/// Creates `name`, retrying on whichever node answers (following leader hints) until the create
/// is acknowledged. TopicAlreadyExists on a retry means an earlier attempt committed.
fn create_with_retry(nodes: &[NodeProc], name: &str, hint: &mut usize) -> bool {
    let deadline = Instant::now() + CLUSTER_TIMEOUT;
    let mut attempt = 0;
    loop {
        assert!(
            Instant::now() < deadline,
            "create {name} never acknowledged"
        );
        let i = *hint % nodes.len();
        if !nodes[i].is_running() {
            *hint += 1;
            continue;
        }
        let mut c = nodes[i].client();
        match c.create_topic(name, 1, BTreeMap::new(), one_assignment()) {
            Ok(_) => return true,
            Err(MetaError::Refused(meta::Refusal::TopicAlreadyExists { .. })) if attempt > 0 => {
                return true
            }
            Err(MetaError::NotController {
                leader_addr: Some(a),
                ..
            }) => {
                if let Some(j) = nodes.iter().position(|n| n.addr == a && n.is_running()) {
                    *hint = j;
                } else {
                    *hint += 1;
                }
            }
            Err(e) => {
                eprintln!("create {name} via node {}: {e}", nodes[i].id);
                *hint += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        attempt += 1;
    }
}

/// Waits until every running node reports the same state, containing `expect`.
fn wait_converged(nodes: &[NodeProc], expect: &BTreeSet<String>) -> MetaState {
    wait_for("convergence", CLUSTER_TIMEOUT, || {
        let states: Vec<MetaState> = nodes
            .iter()
            .filter(|n| n.is_running())
            .map(|n| n.state().ok().map(|(_, s)| s))
            .collect::<Option<Vec<_>>>()?;
        let first = states.first()?.clone();
        if states.iter().all(|s| *s == first) && expect.iter().all(|t| first.topics.contains_key(t))
        {
            Some(first)
        } else {
            None
        }
    })
}

#[test]
fn three_nodes_leader_killed_mid_loop_then_rejoins() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = start_cluster(root.path(), 3, SNAPSHOT_FLAGS);
    let leader = wait_leader(&nodes, CLUSTER_TIMEOUT);
    let mut hint = (leader + 1) % 3; // start on a follower: exercises forwarding
    let mut acked = BTreeSet::new();
    let mut killed = None;
    for i in 0..200 {
        if i == 80 {
            let l = wait_leader(&nodes, CLUSTER_TIMEOUT);
            eprintln!("SIGKILL leader node {}", nodes[l].id);
            nodes[l].kill();
            killed = Some(l);
        }
        let name = format!("topic-{i:03}");
        if create_with_retry(&nodes, &name, &mut hint) {
            acked.insert(name);
        }
    }
    let killed = killed.unwrap();
    let new_leader = wait_leader(&nodes, CLUSTER_TIMEOUT);
    assert_ne!(new_leader, killed);
    // The two survivors hold every acknowledged topic.
    let s = wait_converged(&nodes, &acked);
    assert_eq!(s.topics.len(), 200);
    s.check_invariants().unwrap();

    // The killed node rejoins from its data dir and catches up (through a snapshot: the
    // leader compacted its log meanwhile).
    nodes[killed].restart();
    let s = wait_converged(&nodes, &acked);
    assert_eq!(s.topics.len(), 200);
    let st = nodes[killed].status().unwrap();
    assert!(st.voters.len() == 3, "{st:?}");
    let log = std::fs::read_to_string(&nodes[killed].log_path).unwrap();
    assert!(
        log.contains("installed snapshot from leader"),
        "the rejoined node should have caught up through a snapshot"
    );
    // And it participates: a write through it works.
    create_with_retry(&nodes, "after-rejoin", &mut killed.clone());
    let mut all = acked.clone();
    all.insert("after-rejoin".into());
    wait_converged(&nodes, &all);
}

#[test]
fn fourth_node_joins_as_learner_and_is_promoted() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = start_cluster(root.path(), 3, SNAPSHOT_FLAGS);
    wait_leader(&nodes, CLUSTER_TIMEOUT);
    let mut hint = 0;
    let mut names = BTreeSet::new();
    for i in 0..60 {
        let n = format!("pre-{i:02}");
        create_with_retry(&nodes, &n, &mut hint);
        names.insert(n);
    }
    let addr4 = format!("127.0.0.1:{}", free_port());
    let join = nodes[0].addr.clone();
    let mut flags: Vec<String> = vec!["--join".into(), join];
    flags.extend(SNAPSHOT_FLAGS.iter().map(|s| s.to_string()));
    nodes.push(NodeProc::start(4, &addr4, root.path(), &flags));
    wait_for("node 4 promoted to voter", CLUSTER_TIMEOUT, || {
        let st = nodes[0].status().ok()?;
        st.voters.contains(&4).then_some(())
    });
    let s = wait_converged(&nodes, &names);
    assert_eq!(s.topics.len(), 60);
    // Writes keep working with four voters, through the new node too.
    let mut hint = 3;
    create_with_retry(&nodes, "post", &mut hint);
    names.insert("post".into());
    wait_converged(&nodes, &names);
}

#[test]
fn leader_confirmed_read_never_confirms_stale_state() {
    let root = tempfile::tempdir().unwrap();
    let nodes = start_cluster(root.path(), 3, &[]);
    let l = wait_leader(&nodes, CLUSTER_TIMEOUT);
    let mut hint = l;
    create_with_retry(&nodes, "before", &mut hint);
    wait_converged(&nodes, &BTreeSet::from(["before".to_string()]));

    // 1. A leader cut off from both followers cannot confirm.
    let followers: Vec<usize> = (0..3).filter(|&i| i != l).collect();
    for &f in &followers {
        nodes[f].pause();
    }
    match nodes[l].client().linearizable_read() {
        Err(e @ MetaError::Unconfirmed { .. }) | Err(e @ MetaError::NotController { .. }) => {
            eprintln!("partitioned leader: {e}")
        }
        other => panic!("a partitioned leader must not confirm: {other:?}"),
    }
    for &f in &followers {
        nodes[f].resume();
    }
    wait_for("confirmed read after heal", CLUSTER_TIMEOUT, || {
        nodes[l].client().linearizable_read().ok()
    });

    // 2. A leader paused (SIGSTOP) while the others elect a new leader and move on is stale
    //    when it wakes up: it must not confirm its old state.
    let old = find_leader(&nodes).expect("leader");
    nodes[old].pause();
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    let new = wait_for("new leader", CLUSTER_TIMEOUT, || {
        others.iter().copied().find(|&i| {
            nodes[i]
                .status()
                .is_ok_and(|s| s.server_state == "Leader" && s.current_leader == Some(nodes[i].id))
        })
    });
    let mut hint = new;
    create_with_retry(&nodes, "after", &mut hint);
    let (after_index, s) = nodes[new].client().state().expect("the new leader's state");
    assert!(s.topics.contains_key("after"));
    // The paused node's local copy is stale.
    nodes[old].resume();
    // The read-index protocol through the stale node: an index it answers is never older
    // than the acknowledged create, and its own copy, once applied that far, holds it.
    match nodes[old].client().read_index() {
        Ok(i) => assert!(
            i >= after_index,
            "the stale node confirmed index {i}, older than the acknowledged create at {after_index}"
        ),
        Err(e) => assert!(
            matches!(
                e,
                MetaError::Unconfirmed { .. } | MetaError::NotController { .. }
            ),
            "unexpected error {e}"
        ),
    }
    let confirmed = wait_for(
        "a read index through the old leader",
        CLUSTER_TIMEOUT,
        || nodes[old].client().read_index().ok(),
    );
    assert!(confirmed >= after_index);
    let caught_up = wait_for(
        "the old leader applies the confirmed index",
        CLUSTER_TIMEOUT,
        || {
            nodes[old]
                .client()
                .state()
                .ok()
                .filter(|(applied, _)| *applied >= confirmed)
        },
    );
    assert!(
        caught_up.1.topics.contains_key("after"),
        "a copy applied up to the confirmed index lacks the acknowledged create"
    );
    match nodes[old].client().linearizable_read() {
        Ok((_, s)) => assert!(
            s.topics.contains_key("after"),
            "stale node confirmed a state without 'after'"
        ),
        Err(e) => {
            assert!(
                matches!(
                    e,
                    MetaError::Unconfirmed { .. } | MetaError::NotController { .. }
                ),
                "unexpected error {e}"
            );
            eprintln!("stale node did not confirm: {e}");
        }
    }
    // Once it has caught up, a confirmed read through it sees the new state.
    let (_, s) = wait_for(
        "confirmed read through the old leader",
        CLUSTER_TIMEOUT,
        || nodes[old].client().linearizable_read().ok(),
    );
    assert!(s.topics.contains_key("after"));
}
