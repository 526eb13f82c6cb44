//! The kcat suite (issue #4): keyed produce with Kafka's murmur2 partitioner over every
//! compression codec, then a consume-to-end that must return every value byte-identical, in
//! order per partition, each key on the partition murmur2 names. Run against one broker
//! (`tests/kcat.rs`) and three nodes (`tests/cluster.rs`).

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use super::{kafka_partition, kcat, run_with_timeout, tail};

pub const TOPIC: &str = "kcat-keyed";
pub const PARTITIONS: u32 = 6;
const MESSAGES: usize = 10_000;
const CODECS: &[&str] = &["none", "gzip", "snappy", "lz4", "zstd"];

fn kcat_cmd(bootstrap: &str) -> Command {
    let mut c = Command::new(kcat());
    c.arg("-b").arg(bootstrap);
    c
}

fn value_of(i: usize) -> String {
    // ':' and '|' inside values: kcat -K: splits on the first ':' only; we split on the first 3 '|'.
    format!(
        "value-{i}:payload|{}|ünïcode-{}",
        "x".repeat(i % 37),
        i * 7919
    )
}

/// Runs the suite against `bootstrap` (one broker, or every node of a cluster), on topic
/// [`TOPIC`] of [`PARTITIONS`] partitions, which the caller created.
pub fn run(bootstrap: &str) {
    let topic = TOPIC;

    // Produce in one kcat run per codec; order across runs is sequential, so per-partition order
    // must follow i.
    let per = MESSAGES / CODECS.len();
    for (ci, codec) in CODECS.iter().enumerate() {
        let mut input = String::new();
        for i in ci * per..(ci + 1) * per {
            input.push_str(&format!("key-{}:{}\n", i % 100, value_of(i)));
        }
        let mut c = kcat_cmd(bootstrap);
        c.args(["-P", "-t", topic, "-K:", "-z", codec])
            .args(["-X", "topic.partitioner=murmur2_random"])
            .args(["-X", "linger.ms=5"]);
        let out = run_with_timeout(c, Some(input.as_bytes()), Duration::from_secs(60));
        assert!(
            out.status.success() && !out.stderr.contains("ERROR"),
            "kcat -P -z {codec} failed ({}):\n{}{}",
            out.status,
            out.stdout,
            tail(&out.stderr, 8000)
        );
    }

    let mut c = kcat_cmd(bootstrap);
    c.args([
        "-C",
        "-e",
        "-t",
        topic,
        "-o",
        "beginning",
        "-f",
        "%p|%o|%k|%s\n",
    ]);
    let out = run_with_timeout(c, None, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "kcat -C -e failed ({}):\n{}",
        out.status,
        tail(&out.stderr, 8000)
    );

    // value -> i
    let index: HashMap<String, usize> = (0..MESSAGES).map(|i| (value_of(i), i)).collect();
    let mut seen = vec![false; MESSAGES];
    let mut last_in_partition: HashMap<u32, (i64, usize)> = HashMap::new();
    let mut key_partition: HashMap<String, u32> = HashMap::new();
    let mut lines = 0;
    for line in out.stdout.lines() {
        lines += 1;
        let mut f = line.splitn(4, '|');
        let (p, o, k, v) = (
            f.next().unwrap(),
            f.next().unwrap_or(""),
            f.next().unwrap_or(""),
            f.next().unwrap_or(""),
        );
        let p: u32 = p
            .parse()
            .unwrap_or_else(|_| panic!("bad kcat line {line:?}"));
        let o: i64 = o
            .parse()
            .unwrap_or_else(|_| panic!("bad kcat line {line:?}"));
        let i = *index
            .get(v)
            .unwrap_or_else(|| panic!("value not produced (corrupted?): {line:?}"));
        assert!(!seen[i], "message {i} read twice: {line:?}");
        seen[i] = true;
        assert_eq!(k, format!("key-{}", i % 100), "key mismatch: {line:?}");
        if let Some(&(lo, li)) = last_in_partition.get(&p) {
            assert_eq!(o, lo + 1, "offset gap/reorder in partition {p}: {line:?}");
            assert!(
                i > li,
                "partition {p}: message {i} after {li}: order not kept"
            );
        } else {
            assert_eq!(o, 0, "partition {p} does not start at offset 0: {line:?}");
        }
        last_in_partition.insert(p, (o, i));
        if let Some(&kp) = key_partition.get(k) {
            assert_eq!(kp, p, "key {k} on partitions {kp} and {p}");
        }
        key_partition.insert(k.to_string(), p);
        assert_eq!(
            p,
            kafka_partition(k.as_bytes(), PARTITIONS),
            "key {k} on partition {p}, murmur2 says {}",
            kafka_partition(k.as_bytes(), PARTITIONS)
        );
    }
    let missing: Vec<usize> = (0..MESSAGES).filter(|&i| !seen[i]).take(10).collect();
    assert!(
        missing.is_empty(),
        "read {lines} of {MESSAGES} messages; first missing: {missing:?}\nkcat stderr:\n{}",
        tail(&out.stderr, 4000)
    );
    assert_eq!(key_partition.len(), 100);
    // 100 keys over 6 partitions: murmur2 uses more than one.
    assert!(last_in_partition.len() > 1);
}
