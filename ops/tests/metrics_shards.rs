//! The admin listener (issue #8): `/metrics` is strict Prometheus text and its counters move
//! with produce and fetch; `ringlog shards` shows every core; `ringlog shard move` moves a
//! partition between cores while a producer writes, without losing or duplicating records.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

fn broker_with_admin(cores: usize) -> (Broker, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let b = Broker::start_with(cores, &["--metrics-listen", &admin]);
    (b, admin)
}

fn scrape(admin: &str) -> String {
    let raw = http_request(admin, "GET", "/metrics");
    let (head, body) = raw.split_once("\r\n\r\n").expect("http response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    body.to_string()
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

/// A strict check of the text exposition format 0.0.4; returns samples (series → value).
fn parse_strict(text: &str) -> BTreeMap<String, f64> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("line {}: {line:?}", i + 1);
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name) = (parts.next().unwrap(), parts.next().expect(&at));
            assert!(valid_name(name), "{at}");
            match kind {
                "HELP" => assert!(parts.next().is_some_and(|h| !h.is_empty()), "{at}"),
                "TYPE" => {
                    let t = parts.next().expect(&at);
                    assert!(["counter", "gauge", "histogram"].contains(&t), "{at}");
                    assert!(
                        types.insert(name.to_string(), t.to_string()).is_none(),
                        "TYPE twice: {at}"
                    );
                }
                _ => panic!("unknown comment {at}"),
            }
            continue;
        }
        assert!(!line.is_empty(), "{at}");
        let (series, value) = line.rsplit_once(' ').expect(&at);
        let v: f64 = value.parse().unwrap_or_else(|_| panic!("bad value {at}"));
        let name = series.split('{').next().unwrap();
        assert!(valid_name(name), "{at}");
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                let inner = labels
                    .strip_prefix('{')
                    .and_then(|l| l.strip_suffix('}'))
                    .expect(&at);
                for kv in inner.split("\",") {
                    let (k, v) = kv.split_once("=\"").expect(&at);
                    assert!(valid_name(k), "{at}");
                    assert!(!v.trim_end_matches('"').contains('"'), "{at}");
                }
            }
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suf| {
                name.strip_suffix(suf)
                    .filter(|f| types.get(*f).map(String::as_str) == Some("histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "sample before its TYPE: {at}");
        if types[family] == "counter" {
            assert!(v >= 0.0, "negative counter {at}");
        }
        assert!(
            samples.insert(series.to_string(), v).is_none(),
            "duplicate series {at}"
        );
    }
    // Histograms: cumulative buckets, +Inf equals _count.
    for (family, t) in &types {
        if t != "histogram" {
            continue;
        }
        let mut by_core: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (series, v) in &samples {
            if let Some(labels) = series.strip_prefix(&format!("{family}_bucket{{")) {
                let core = labels
                    .split("core=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_string();
                let le = labels
                    .split("le=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                by_core.entry(core).or_default().push((le, *v));
            }
        }
        for (core, mut b) in by_core {
            b.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap());
            assert!(
                b.windows(2).all(|w| w[0].1 <= w[1].1),
                "{family} buckets not cumulative"
            );
            let count = samples[&format!("{family}_count{{core=\"{core}\"}}")];
            assert_eq!(
                b.last().unwrap().1,
                count,
                "{family} +Inf bucket equals _count"
            );
        }
    }
    samples
}

fn sum(samples: &BTreeMap<String, f64>, prefix: &str) -> f64 {
    samples
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn metrics_parse_strictly_and_move_with_produce_and_fetch() {
    let (broker, admin) = broker_with_admin(2);
    create_topic(&broker, "m", 4, &[]);
    let before = parse_strict(&scrape(&admin));
    let input: String = (0..500).map(|i| format!("v{i}\n")).collect();
    let mut p = Command::new(kcat());
    p.args(["-b", &broker.bootstrap(), "-P", "-t", "m"]);
    run_ok(p, Some(input.as_bytes()), Duration::from_secs(60));
    let mut c = Command::new(kcat());
    c.args([
        "-b",
        &broker.bootstrap(),
        "-C",
        "-t",
        "m",
        "-o",
        "0",
        "-e",
        "-q",
    ]);
    assert_eq!(
        run_ok(c, None, Duration::from_secs(60)).lines().count(),
        500
    );
    let after = parse_strict(&scrape(&admin));
    assert_eq!(
        sum(&after, "ringlog_records_in_total") - sum(&before, "ringlog_records_in_total"),
        500.0
    );
    assert!(
        sum(&after, "ringlog_records_out_total") - sum(&before, "ringlog_records_out_total")
            >= 500.0
    );
    assert!(
        sum(&after, "ringlog_requests_total{core=\"0\",api=\"Produce\"")
            + sum(&after, "ringlog_requests_total{core=\"1\",api=\"Produce\"")
            > 0.0
    );
    assert!(
        sum(&after, "ringlog_fdatasync_latency_seconds_count")
            > sum(&before, "ringlog_fdatasync_latency_seconds_count")
    );
    assert!(
        sum(&after, "ringlog_request_bytes_total") > sum(&before, "ringlog_request_bytes_total")
    );
    for core in ["0", "1"] {
        assert!(
            after.contains_key(&format!("ringlog_partitions{{core=\"{core}\"}}")),
            "every core reports"
        );
    }
    // The shards view lists both cores, in JSON and as a table.
    let mut cmd = Command::new(ringlog_bin());
    cmd.args([
        "shards",
        "--admin",
        &admin,
        "--json",
        "--interval-ms",
        "200",
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&run_ok(cmd, None, Duration::from_secs(30))).unwrap();
    let cores: Vec<u64> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["core"].as_u64().unwrap())
        .collect();
    assert_eq!(cores, vec![0, 1]);
    let parts: u64 = v
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["partitions"].as_u64().unwrap())
        .sum();
    assert_eq!(
        parts,
        4 + 2 + 2,
        "4 partitions of m plus one __consumer_offsets and one __transaction_state partition per core"
    );
    // Each core's open-file budget and what a partition costs the node (issue #13).
    for c in v.as_array().unwrap() {
        let open = c["open_files"].as_u64().unwrap();
        let budget = c["open_files_budget"].as_u64().unwrap();
        assert!(open > 0 && open <= budget, "{c}");
        let per_partition = c["node_resident_bytes_per_partition"].as_f64().unwrap();
        assert!(per_partition > 0.0, "{c}");
    }
    let mut cmd = Command::new(ringlog_bin());
    cmd.args(["shards", "--admin", &admin, "--interval-ms", "200"]);
    let table = run_ok(cmd, None, Duration::from_secs(30));
    assert!(
        table.starts_with("CORE")
            && table.contains("FSYNC-P99-MS")
            && table.contains("OPEN-FILES")
            && table.contains("KIB/PARTITION"),
        "{table}"
    );
}

#[test]
fn shard_move_while_producing_loses_and_duplicates_nothing() {
    let (broker, admin) = broker_with_admin(2);
    create_topic(&broker, "mv", 1, &[]);
    let scrape_owner = || -> String {
        let s = parse_strict(&scrape(&admin));
        s.keys()
            .find(|k| k.starts_with("ringlog_partition_log_bytes{") && k.contains("topic=\"mv\""))
            .map(|k| {
                k.split("core=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .expect("mv/0 is served")
    };
    let from = scrape_owner();
    let to = if from == "0" { "1" } else { "0" };
    const N: u64 = 15_000;
    let mut producer = python_cmd(
        "group_producer.py",
        &[&broker.bootstrap(), "mv", "0", &N.to_string(), "5000"],
    );
    producer.stdout(Stdio::piped()).stderr(Stdio::piped());
    let producer = producer.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let mut mv = Command::new(ringlog_bin());
    mv.args(["shard", "move", "mv/0", "--core", to, "--admin", &admin]);
    let out = run_ok(mv, None, Duration::from_secs(30));
    assert!(out.contains(&format!("to core {to}")), "{out}");
    let out = producer.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("DONE {N}")),
        "every record acknowledged: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        scrape_owner(),
        to,
        "the partition is served by its new core"
    );
    let mut c = Command::new(kcat());
    c.args([
        "-b",
        &broker.bootstrap(),
        "-C",
        "-t",
        "mv",
        "-o",
        "0",
        "-e",
        "-q",
    ]);
    let values: Vec<u64> = run_ok(c, None, Duration::from_secs(60))
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let mut sorted = values.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), values.len(), "no record stored twice");
    assert_eq!(sorted, (0..N).collect::<Vec<_>>(), "every record stored");
    // Refusals name the problem.
    let mut bad = Command::new(ringlog_bin());
    bad.args(["shard", "move", "mv/0", "--core", "9", "--admin", &admin]);
    let o = run_with_timeout(bad, None, Duration::from_secs(30));
    assert!(
        !o.status.success() && o.stderr.contains("core 9 does not exist"),
        "{}",
        o.stderr
    );
}
