//! Cross-core requests (issue #4, DESIGN §4): with `--cores 2` a 6-partition topic is spread
//! over both cores; one kcat producer (one connection, so its Produce requests carry partitions
//! of both cores and must be split and gathered) writes keyed messages, and every message must
//! read back. The broker's info log must show partitions opened on core 0 and on core 1.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::Command;
use std::time::Duration;
use support::*;

const TOPIC: &str = "xcore";
const PARTITIONS: u32 = 6;
const MESSAGES: usize = 6_000;

/// `partition <topic>/<p> opened on core <c>` lines of the broker log: partition -> cores.
fn parse_owners(stderr: &str, topic: &str) -> BTreeMap<u32, BTreeSet<u32>> {
    let prefix = format!("partition {topic}/");
    let mut m: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for line in stderr.lines() {
        let Some(i) = line.find(&prefix) else {
            continue;
        };
        let rest = &line[i + prefix.len()..];
        let Some((p, rest)) = rest.split_once(" opened on core ") else {
            continue;
        };
        let c: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if let (Ok(p), Ok(c)) = (p.parse(), c.parse()) {
            m.entry(p).or_default().insert(c);
        }
    }
    m
}

#[test]
fn one_connection_produces_to_partitions_on_both_cores() {
    let mut broker = Broker::start(2);
    create_topic(&broker, TOPIC, PARTITIONS, &[]);

    let mut input = String::new();
    for i in 0..MESSAGES {
        input.push_str(&format!("k{}:v{i}\n", i % 60));
    }
    let mut c = Command::new(kcat());
    c.args(["-b", &broker.bootstrap(), "-P", "-t", TOPIC, "-K:"])
        .args([
            "-X",
            "topic.partitioner=murmur2_random",
            "-X",
            "linger.ms=20",
        ]);
    let out = run_with_timeout(c, Some(input.as_bytes()), Duration::from_secs(60));
    assert!(
        out.status.success() && !out.stderr.contains("ERROR"),
        "kcat -P failed ({}):\n{}",
        out.status,
        tail(&out.stderr, 8000)
    );

    let mut c = Command::new(kcat());
    c.args([
        "-b",
        &broker.bootstrap(),
        "-C",
        "-e",
        "-t",
        TOPIC,
        "-o",
        "0",
    ])
    .args(["-f", "%p|%o|%k|%s\n"]);
    let out = run_ok(c, None, Duration::from_secs(60));
    let mut seen = vec![false; MESSAGES];
    let mut per_partition: HashMap<u32, Vec<usize>> = HashMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.splitn(4, '|').collect();
        assert_eq!(f.len(), 4, "bad kcat line {line:?}");
        let p: u32 = f[0].parse().unwrap();
        let i: usize = f[3]
            .strip_prefix('v')
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("bad value in {line:?}"));
        assert!(
            i < MESSAGES && !seen[i],
            "unexpected or repeated value {line:?}"
        );
        seen[i] = true;
        assert_eq!(f[2], format!("k{}", i % 60), "key mismatch {line:?}");
        assert_eq!(
            p,
            kafka_partition(f[2].as_bytes(), PARTITIONS),
            "partition of {line:?}"
        );
        per_partition.entry(p).or_default().push(i);
    }
    let read = seen.iter().filter(|s| **s).count();
    assert_eq!(read, MESSAGES, "read back {read} of {MESSAGES} messages");
    for (p, v) in &per_partition {
        assert!(
            v.windows(2).all(|w| w[0] < w[1]),
            "partition {p}: order not kept"
        );
    }

    let log = broker.stderr_text();
    let owners = parse_owners(&log, TOPIC);
    let cores: BTreeSet<u32> = owners.values().flatten().copied().collect();
    assert_eq!(
        owners.keys().copied().collect::<Vec<_>>(),
        (0..PARTITIONS).collect::<Vec<_>>(),
        "want a `partition {TOPIC}/<p> opened on core <c>` line for every partition; got {owners:?}"
    );
    assert!(
        cores.contains(&0) && cores.contains(&1),
        "partitions not spread over cores 0 and 1: {owners:?}"
    );
    // The single producer connection wrote to partitions owned by both cores.
    let written_cores: BTreeSet<u32> = per_partition
        .keys()
        .flat_map(|p| owners[p].iter().copied())
        .collect();
    assert!(
        written_cores.len() == 2,
        "the produced keys only hit partitions of cores {written_cores:?} (owners {owners:?})"
    );

    // Clean restart: the same data reads back, and placement is persisted (DESIGN §4), so each
    // partition opens on the same core again.
    broker.terminate();
    let before = log.len();
    broker.restart();
    let mut c = Command::new(kcat());
    c.args([
        "-b",
        &broker.bootstrap(),
        "-C",
        "-e",
        "-t",
        TOPIC,
        "-o",
        "0",
    ])
    .args(["-f", "%p|%o|%k|%s\n"]);
    let again = run_ok(c, None, Duration::from_secs(60));
    let mut a: Vec<&str> = out.lines().collect();
    let mut b: Vec<&str> = again.lines().collect();
    a.sort_unstable();
    b.sort_unstable();
    assert!(
        a == b,
        "after a clean restart kcat reads {} lines, before {}",
        b.len(),
        a.len()
    );
    let log2 = broker.stderr_text();
    let owners2 = parse_owners(&log2[before..], TOPIC);
    assert_eq!(
        owners2, owners,
        "partition placement changed across a restart"
    );
    broker.terminate();
}
