//! Kafka's own reassignment and election tools against a three-node ringlog cluster and a
//! three-node Apache Kafka 4.4 cluster (the reference peer, `support::peer`), with the same
//! command lines: `kafka-reassign-partitions` (generate, execute, verify: which also clears
//! the replication throttles) and `kafka-leader-election`. Each step's outcome is compared,
//! and ringlog's own answer is checked: the partition's replicas are the ones asked for.
//!
//! On the same clusters, the wrong-coordinator error path of the differential protocol
//! checks (which needs more than one node): a group's and a transactional id's requests sent
//! to a node that is not their coordinator answer NOT_COORDINATOR on both.

mod support;

use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeGroupsRequest, DescribeGroupsResponse, EndTxnRequest, EndTxnResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse,
    InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use support::wire::call;

use support::cluster::{bootstrap, cluster};
use support::peer::KafkaPeer;

/// How long a reassignment may take to complete, on either cluster.
const REASSIGN_TIMEOUT: Duration = Duration::from_secs(90);
/// The topic: three partitions, two replicas each, placed by hand.
const TOPIC: &str = "moved";
const ASSIGNMENT: &str = "1:2,2:3,3:1";
/// Partition 0 moves from nodes 1, 2 to nodes 2, 3.
const PLAN: &str = r#"{"version":1,"partitions":[{"topic":"moved","partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}"#;

/// Runs a Kafka tool; its stdout, or a panic with both outputs unless it exits 0.
fn tool(name: &str, args: &[&str]) -> String {
    let out = KafkaPeer::tool(name, args);
    assert!(
        out.status.success(),
        "{name} {args:?}:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    out.stdout
}

/// The lines of a tool's output that do not depend on the cluster (log dirs, ids).
fn outcome(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('{'))
        .map(str::to_string)
        .collect()
}

/// The replicas of `TOPIC`'s partition `p` as kafka-topics describes them.
fn replicas(bs: &str, p: i32) -> String {
    let out = tool(
        "kafka-topics",
        &["--bootstrap-server", bs, "--describe", "--topic", TOPIC],
    );
    let needle = format!("Partition: {p}\t");
    let line = out
        .lines()
        .find(|l| l.contains(&needle))
        .unwrap_or_else(|| panic!("no partition {p}: {out}"));
    line.split('\t')
        .find_map(|f| f.trim().strip_prefix("Replicas: "))
        .unwrap_or_else(|| panic!("no replicas: {line}"))
        .to_string()
}

/// Every step on one cluster: what each printed that must agree with the other cluster.
fn reassign_and_elect(bs: &str, dir: &Path) -> Vec<(String, Vec<String>)> {
    let mut seen = Vec::new();
    let created = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            bs,
            "--create",
            "--topic",
            TOPIC,
            "--replica-assignment",
            ASSIGNMENT,
        ],
    );
    seen.push(("create".to_string(), outcome(&created)));
    assert_eq!(replicas(bs, 0), "1,2");
    // generate: a proposal over every node, each partition on two of them.
    let topics = dir.join("topics.json");
    std::fs::write(
        &topics,
        format!(r#"{{"topics":[{{"topic":"{TOPIC}"}}],"version":1}}"#),
    )
    .unwrap();
    let generated = tool(
        "kafka-reassign-partitions",
        &[
            "--bootstrap-server",
            bs,
            "--topics-to-move-json-file",
            topics.to_str().unwrap(),
            "--broker-list",
            "1,2,3",
            "--generate",
        ],
    );
    let proposal = generated
        .lines()
        .skip_while(|l| !l.starts_with("Proposed partition reassignment configuration"))
        .nth(1)
        .unwrap_or_else(|| panic!("no proposal: {generated}"));
    let proposal: serde_json::Value = serde_json::from_str(proposal).unwrap();
    let parts = proposal["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 3, "{proposal}");
    for p in parts {
        let r: Vec<i64> = p["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_i64().unwrap())
            .collect();
        assert!(
            r.len() == 2 && r.iter().all(|n| (1..=3).contains(n)) && r[0] != r[1],
            "{p}"
        );
    }
    seen.push((
        "generate".to_string(),
        outcome(&generated)
            .into_iter()
            .filter(|l| !l.starts_with('{'))
            .collect(),
    ));
    // execute, then verify until done (verify also clears the replication throttles).
    let plan = dir.join("plan.json");
    std::fs::write(&plan, PLAN).unwrap();
    let plan = plan.to_str().unwrap();
    let executed = tool(
        "kafka-reassign-partitions",
        &[
            "--bootstrap-server",
            bs,
            "--reassignment-json-file",
            plan,
            "--execute",
        ],
    );
    seen.push((
        "execute".to_string(),
        outcome(&executed)
            .into_iter()
            .filter(|l| l.starts_with("Successfully"))
            .collect(),
    ));
    let t0 = Instant::now();
    let verified = loop {
        let out = tool(
            "kafka-reassign-partitions",
            &[
                "--bootstrap-server",
                bs,
                "--reassignment-json-file",
                plan,
                "--verify",
            ],
        );
        if out.contains(&format!("Reassignment of partition {TOPIC}-0 is completed")) {
            break out;
        }
        assert!(t0.elapsed() < REASSIGN_TIMEOUT, "not completed: {out}");
        std::thread::sleep(Duration::from_millis(500));
    };
    seen.push(("verify".to_string(), outcome(&verified)));
    assert_eq!(replicas(bs, 0), "2,3", "the partition moved");
    // The preferred replica of partition 0 is now node 2, which leads it after the move.
    let elected = tool(
        "kafka-leader-election",
        &[
            "--bootstrap-server",
            bs,
            "--election-type",
            "PREFERRED",
            "--topic",
            TOPIC,
            "--partition",
            "0",
        ],
    );
    seen.push(("leader-election".to_string(), outcome(&elected)));
    seen
}

/// The group and transactional id whose requests go to a node that does not coordinate them.
const WRONG_GROUP: &str = "wrong-coordinator-group";
const WRONG_TXN: &str = "wrong-coordinator-txn";
/// Kafka's NOT_COORDINATOR.
const NOT_COORDINATOR: i16 = 16;
/// How long a coordinator may take to be found (Kafka creates its internal topics on the
/// first lookup).
const COORDINATOR_WAIT: Duration = Duration::from_secs(60);

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// A connection to `addr`, or to the first of a comma-separated bootstrap list.
fn connect(addr: &str) -> TcpStream {
    let addr = addr.split(',').next().unwrap_or(addr);
    let c = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c
}

/// The node coordinating `key` (`key_type` 0: group, 1: transactional id).
fn coordinator(bs: &str, key_type: i8, key: &str) -> i32 {
    let t0 = Instant::now();
    loop {
        let r: FindCoordinatorResponse = call(
            &mut connect(bs),
            10,
            3,
            1,
            &FindCoordinatorRequest::default()
                .with_key(s(key))
                .with_key_type(key_type),
        );
        if r.error_code == 0 {
            return r.node_id.0;
        }
        assert!(
            t0.elapsed() < COORDINATOR_WAIT,
            "{bs}: no coordinator for {key}: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A node other than `not`: its address.
fn other_node(bs: &str, not: i32) -> String {
    let m: MetadataResponse = call(
        &mut connect(bs),
        3,
        12,
        1,
        &MetadataRequest::default().with_topics(Some(vec![])),
    );
    let b = m
        .brokers
        .iter()
        .find(|b| b.node_id != BrokerId(not))
        .unwrap_or_else(|| panic!("{bs}: no node but {not}: {m:?}"));
    format!("{}:{}", b.host, b.port)
}

/// Each group and transactional request sent to a node that does not coordinate it, with
/// the error code it answered.
fn wrong_coordinator(bs: &str) -> Vec<(&'static str, i16)> {
    let group = other_node(bs, coordinator(bs, 0, WRONG_GROUP));
    let txn = other_node(bs, coordinator(bs, 1, WRONG_TXN));
    let gid = || GroupId(s(WRONG_GROUP));
    let tid = || TransactionalId(s(WRONG_TXN));
    let fetched: OffsetFetchResponse = call(
        &mut connect(&group),
        9,
        7,
        1,
        &OffsetFetchRequest::default().with_group_id(gid()),
    );
    let committed: OffsetCommitResponse = call(
        &mut connect(&group),
        8,
        8,
        1,
        &OffsetCommitRequest::default()
            .with_group_id(gid())
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(0)])]),
    );
    let beat: HeartbeatResponse = call(
        &mut connect(&group),
        12,
        4,
        1,
        &HeartbeatRequest::default()
            .with_group_id(gid())
            .with_generation_id(1)
            .with_member_id(s("m")),
    );
    let described: DescribeGroupsResponse = call(
        &mut connect(&group),
        15,
        5,
        1,
        &DescribeGroupsRequest::default().with_groups(vec![gid()]),
    );
    let init: InitProducerIdResponse = call(
        &mut connect(&txn),
        22,
        4,
        1,
        &InitProducerIdRequest::default()
            .with_transactional_id(Some(tid()))
            .with_transaction_timeout_ms(60_000),
    );
    let ended: EndTxnResponse = call(
        &mut connect(&txn),
        26,
        3,
        1,
        &EndTxnRequest::default()
            .with_transactional_id(tid())
            .with_producer_id(ProducerId(1))
            .with_producer_epoch(0)
            .with_committed(true),
    );
    vec![
        ("OffsetFetch", fetched.error_code),
        (
            "OffsetCommit",
            committed
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map_or(-1, |p| p.error_code),
        ),
        ("Heartbeat", beat.error_code),
        (
            "DescribeGroups",
            described.groups.first().map_or(-1, |g| g.error_code),
        ),
        ("InitProducerId", init.error_code),
        ("EndTxn", ended.error_code),
    ]
}

#[test]
fn kafka_reassign_and_leader_election_tools_agree_on_three_nodes() {
    let Some(peer) = KafkaPeer::start_cluster(&[]) else {
        return;
    };
    let nodes = cluster(3, 1);
    let dir = tempfile::tempdir().unwrap();
    let ours_dir = dir.path().join("ringlog");
    let theirs_dir = dir.path().join("kafka");
    std::fs::create_dir_all(&ours_dir).unwrap();
    std::fs::create_dir_all(&theirs_dir).unwrap();
    let ours = reassign_and_elect(&bootstrap(&nodes), &ours_dir);
    let theirs = reassign_and_elect(&peer.bootstrap(), &theirs_dir);
    assert_eq!(ours.len(), theirs.len());
    for ((step, a), (_, b)) in ours.iter().zip(&theirs) {
        eprintln!("{step}: {a:?}");
        assert_eq!(
            a, b,
            "{step}: ringlog (left) and Kafka 4.4 (right) printed otherwise"
        );
    }

    let ours = wrong_coordinator(&bootstrap(&nodes));
    let theirs = wrong_coordinator(&peer.bootstrap());
    eprintln!("wrong coordinator: ringlog {ours:?}, kafka {theirs:?}");
    assert_eq!(
        ours, theirs,
        "requests to a node that is not the coordinator: ringlog (left), Kafka 4.4 (right)"
    );
    assert!(
        ours.iter().all(|(_, code)| *code == NOT_COORDINATOR),
        "ringlog: {ours:?}"
    );
}
