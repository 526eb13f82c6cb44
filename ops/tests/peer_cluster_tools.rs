//! Kafka's own reassignment and election tools against a three-node ringlog cluster and a
//! three-node Apache Kafka 4.4 cluster (the reference peer, `support::peer`), with the same
//! command lines: `kafka-reassign-partitions` (generate, execute, verify: which also clears
//! the replication throttles) and `kafka-leader-election`. Each step's outcome is compared,
//! and ringlog's own answer is checked: the partition's replicas are the ones asked for.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

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
}
