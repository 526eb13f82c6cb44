//! The admin listener (issue #8): `/metrics` is strict Prometheus text and its counters move
//! with produce and fetch; `ringlog shards` shows every core; `ringlog shard move` moves a
//! partition between cores while a producer writes, without losing or duplicating records.

mod support;

use std::collections::BTreeMap;
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
    assert!(head.contains("application/openmetrics-text"), "{head}");
    body.to_string()
}

/// The page read by the strict OpenMetrics parser (it refuses any malformed line, a sample
/// outside its family, a missing `# EOF`); returns samples (series → value), a series
/// written as on the page (`name{label="v",...}`, labels in the page's order). Histograms
/// must be cumulative with `+Inf` equal to `_count`.
fn parse_strict(text: &str) -> BTreeMap<String, f64> {
    use openmetrics_parser::OpenMetricsValue;
    let page = openmetrics_parser::openmetrics::parse_openmetrics(text)
        .unwrap_or_else(|e| panic!("invalid OpenMetrics text: {e:?}\n{text}"));
    let mut samples = BTreeMap::new();
    for (name, family) in &page.families {
        let names = family.get_label_names().to_vec();
        for sample in family.iter_samples() {
            let labels = sample.get_labelset().unwrap();
            let series = |suffix: &str, extra: Option<(&str, String)>| {
                let mut l: Vec<String> = names
                    .iter()
                    .map(|k| format!("{k}=\"{}\"", labels.get_label_value(k).unwrap()))
                    .collect();
                if let Some((k, v)) = extra {
                    l.push(format!("{k}=\"{v}\""));
                }
                if l.is_empty() {
                    format!("{name}{suffix}")
                } else {
                    format!("{name}{suffix}{{{}}}", l.join(","))
                }
            };
            let mut put = |k: String, v: f64| {
                assert!(
                    samples.insert(k.clone(), v).is_none(),
                    "duplicate series {k}"
                );
            };
            match &sample.value {
                OpenMetricsValue::Counter(c) => {
                    assert!(c.value.as_f64() >= 0.0, "negative counter {name}");
                    put(series("_total", None), c.value.as_f64())
                }
                OpenMetricsValue::Gauge(g) => put(series("", None), g.as_f64()),
                OpenMetricsValue::Histogram(h) => {
                    let counts: Vec<f64> = h.buckets.iter().map(|b| b.count.as_f64()).collect();
                    assert!(
                        counts.windows(2).all(|w| w[0] <= w[1]),
                        "{name} buckets not cumulative"
                    );
                    let last = h.buckets.last().expect("a +Inf bucket");
                    assert_eq!(last.upper_bound, f64::INFINITY, "{name}: +Inf last");
                    assert_eq!(
                        Some(last.count.as_f64() as u64),
                        h.count,
                        "{name} +Inf bucket equals _count"
                    );
                    put(series("_count", None), h.count.unwrap() as f64);
                    put(series("_sum", None), h.sum.as_ref().unwrap().as_f64());
                    for b in &h.buckets {
                        put(
                            series("_bucket", Some(("le", b.upper_bound.to_string()))),
                            b.count.as_f64(),
                        );
                    }
                }
                other => panic!("{name}: unexpected metric kind {other:?}"),
            }
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
