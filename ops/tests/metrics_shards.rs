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
/// written as on the page (`name{label="v",...}`, `core` first, the other labels by name). Histograms
/// must be cumulative with `+Inf` equal to `_count`.
fn parse_strict(text: &str) -> BTreeMap<String, f64> {
    use openmetrics_parser::OpenMetricsValue;
    let page = openmetrics_parser::openmetrics::parse_openmetrics(text)
        .unwrap_or_else(|e| panic!("invalid OpenMetrics text: {e:?}\n{text}"));
    let mut samples = BTreeMap::new();
    for (name, family) in &page.families {
        // Labels in a fixed order: `core` first, then by name.
        let mut names = family.get_label_names().to_vec();
        names.sort_by_key(|n| (n != "core", n.clone()));
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

/// Sum of a core table column over the cores of one `shards` frame (rows after the header
/// up to the first blank line).
fn column_sum(frame: &str, column: &str) -> f64 {
    let mut lines = frame.lines().skip_while(|l| !l.starts_with("CORE"));
    let header: Vec<&str> = lines
        .next()
        .expect("a core table")
        .split_whitespace()
        .collect();
    let i = header.iter().position(|h| *h == column).expect(column);
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            l.split_whitespace()
                .nth(i)
                .unwrap()
                .parse::<f64>()
                .unwrap_or(0.0)
        })
        .sum()
}

/// `shards --watch` under a pseudo-terminal (issue #22): it redraws a frame per interval,
/// the figures move with a producer's load, and `--hot` names the partition made hot (with
/// its core); `/v1/shards` reports exact interval percentiles of produce, fsync and the
/// cross-core hop.
#[test]
fn shards_watch_redraws_under_load_and_hot_names_the_hot_partition() {
    let (broker, admin) = broker_with_admin(2);
    create_topic(&broker, "hot", 1, &[]);
    create_topic(&broker, "cold", 4, &[]);
    kcat_write(&broker, "cold", 1, &["a", "b"]);
    let mut producer = python_cmd(
        "group_producer.py",
        &[&broker.bootstrap(), "hot", "0", "40000", "4000"],
    );
    producer.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut producer = producer.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));

    let bin = ringlog_bin();
    let watch = python_cmd(
        "pty_run.py",
        &[
            "60",
            bin.to_str().unwrap(),
            "shards",
            "--watch",
            "--frames",
            "4",
            "--interval-ms",
            "400",
            "--admin",
            &admin,
        ],
    );
    let screen = run_ok(watch, None, Duration::from_secs(90));
    let frames: Vec<&str> = screen
        .split("\x1b[H\x1b[2J")
        .filter(|f| !f.trim().is_empty())
        .collect();
    assert_eq!(frames.len(), 4, "one frame per interval: {screen}");
    for f in &frames {
        assert!(f.contains("ringlog shards") && f.contains("hottest"), "{f}");
        assert!(
            f.contains("hot/0"),
            "the hot partition is named in every frame: {f}"
        );
    }
    let rates: Vec<f64> = frames
        .iter()
        .map(|f| column_sum(f, "RECORDS-IN/S"))
        .collect();
    assert!(
        rates.iter().all(|r| *r > 0.0),
        "records flow in every frame: {rates:?}"
    );
    assert!(
        rates.windows(2).any(|w| w[0] != w[1]),
        "the figures move: {rates:?}"
    );

    // --hot: the busiest partition first, with the core it lives on.
    let mut cmd = Command::new(ringlog_bin());
    cmd.args([
        "shards",
        "--hot",
        "3",
        "--json",
        "--interval-ms",
        "500",
        "--admin",
        &admin,
    ]);
    let hot: serde_json::Value =
        serde_json::from_str(&run_ok(cmd, None, Duration::from_secs(30))).unwrap();
    let first = &hot[0];
    assert_eq!(
        (first["topic"].as_str(), first["partition"].as_u64()),
        (Some("hot"), Some(0)),
        "{hot}"
    );
    let owner = scrape_owner(&admin, "hot");
    assert_eq!(first["core"].as_u64(), Some(owner), "{hot}");
    let mut cmd = Command::new(ringlog_bin());
    cmd.args([
        "shards",
        "--hot",
        "3",
        "--interval-ms",
        "300",
        "--admin",
        &admin,
    ]);
    let table = run_ok(cmd, None, Duration::from_secs(30));
    let row = table.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("hot/0") && row.split_whitespace().nth(1) == Some(&owner.to_string()[..]),
        "{table}"
    );

    // The view's percentiles, measured over the interval: produce on the cores the client's
    // connections are on, fsync on the owner; traffic crossed cores (a connection's core
    // forwards to the owner).
    let (_, body) = http_request(&admin, "GET", "/v1/shards?interval_ms=500")
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_string(), b.to_string()))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    for lat in ["produce", "fsync"] {
        let measured: Vec<&serde_json::Value> = v["cores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["latency"][lat])
            .filter(|p| p["count"].as_u64().unwrap() > 0)
            .collect();
        assert!(!measured.is_empty(), "{lat} measured: {v}");
        for p in measured {
            let (p50, p99, p999, max) = (
                p["p50_ms"].as_f64().unwrap(),
                p["p99_ms"].as_f64().unwrap(),
                p["p999_ms"].as_f64().unwrap(),
                p["max_ms"].as_f64().unwrap(),
            );
            assert!(
                0.0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
                "{lat}: {p}"
            );
        }
    }
    assert!(
        v["cores"][owner as usize]["latency"]["fsync"]["count"]
            .as_u64()
            .unwrap()
            > 0,
        "{v}"
    );
    let hops: u64 = v["cores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["latency"]["cross_core_hop"]["count"].as_u64().unwrap())
        .sum();
    let queued: u64 = v["cores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["latency"]["cross_core_queue"]["count"].as_u64().unwrap())
        .sum();
    // Every hop is queued once, but the two counts are read on different cores at slightly
    // different moments (and the view's own gathering crosses cores), so calls in flight at
    // either edge of the interval may count on one side only.
    const IN_FLIGHT_AT_THE_EDGES: u64 = 16;
    assert!(
        hops > 0 && queued > 0 && hops.abs_diff(queued) <= IN_FLIGHT_AT_THE_EDGES,
        "every hop was queued once: {hops} {queued}"
    );
    // Bad requests get a clear error.
    let raw = http_request(&admin, "GET", "/v1/shards?interval_ms=0");
    assert!(
        raw.starts_with("HTTP/1.1 400") && raw.contains("interval_ms= is 1 to"),
        "{raw}"
    );
    let mut bad = Command::new(ringlog_bin());
    bad.args(["shards", "--frames", "2", "--admin", &admin]);
    let o = run_with_timeout(bad, None, Duration::from_secs(30));
    assert!(
        !o.status.success() && o.stderr.contains("add --watch"),
        "{}",
        o.stderr
    );

    let _ = producer.kill();
    let _ = producer.wait();
}

/// The core that serves `topic`/0, read off `/metrics`.
fn scrape_owner(admin: &str, topic: &str) -> u64 {
    let s = parse_strict(&scrape(admin));
    s.keys()
        .find(|k| {
            k.starts_with("ringlog_partition_log_bytes{")
                && k.contains(&format!("topic=\"{topic}\""))
                && k.contains("partition=\"0\"")
        })
        .and_then(|k| k.split("core=\"").nth(1)?.split('"').next()?.parse().ok())
        .expect("the partition is served")
}

/// The admin listener's head is read by httparse within its bounds: a malformed head is a
/// 400, too many headers a 431, and the listener serves on.
#[test]
fn the_admin_listener_refuses_malformed_and_oversized_heads() {
    use std::io::{Read, Write};
    let (_broker, admin) = broker_with_admin(1);
    let send = |raw: &[u8]| -> String {
        let mut s = std::net::TcpStream::connect(&admin).unwrap();
        s.write_all(raw).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    let bad = send(b"GET /metrics HTTP/1.1\r\nHost x\r\n\r\n");
    assert!(
        bad.starts_with("HTTP/1.1 400") && bad.contains("malformed request head"),
        "{bad}"
    );
    let many: String = (0..100).map(|i| format!("X-{i}: y\r\n")).collect();
    let big = send(format!("GET /metrics HTTP/1.1\r\n{many}\r\n").as_bytes());
    assert!(big.starts_with("HTTP/1.1 431"), "{big}");
    let huge = send(format!("GET /{} HTTP/1.1\r\n", "a".repeat(20_000)).as_bytes());
    assert!(huge.starts_with("HTTP/1.1 431"), "{huge}");
    assert!(scrape(&admin).ends_with("# EOF\n"), "still serving");
}

/// `serve --trace-requests` (issue #22): every request is a `request` span on its
/// connection's core, and the partition work it sends to another core is a
/// `produce_partition` span nested under it there, so a slow request can be followed across
/// cores. Without the flag no span line is written.
#[test]
fn traced_requests_are_followed_across_cores() {
    let broker = Broker::start_with(2, &["--trace-requests"]);
    create_topic(&broker, "tr", 4, &[]);
    let mut p = Command::new(kcat());
    p.args(["-b", &broker.bootstrap(), "-P", "-t", "tr", "-K", ":"]);
    let input: String = (0..64).map(|i| format!("k{i}:v{i}\n")).collect();
    run_ok(p, Some(input.as_bytes()), Duration::from_secs(60));
    let line = broker.wait_for_log_line(
        &["request{api=\"Produce\"", "produce_partition{"],
        Duration::from_secs(10),
    );
    assert!(line.contains("close time.busy="), "{line}");
    let log = broker.stderr_text();
    let core_of = |span: &str, l: &str| -> Option<String> {
        let rest = l.split(&format!("{span}{{")).nth(1)?;
        let fields = rest.split('}').next()?;
        Some(
            fields
                .split("core=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .to_string(),
        )
    };
    let crossed =
        log.lines().any(
            |l| match (core_of("request", l), core_of("produce_partition", l)) {
                (Some(a), Some(b)) => a != b,
                _ => false,
            },
        );
    assert!(
        crossed,
        "a produce_partition span on another core nests under its request:\n{log}"
    );
    drop(broker);

    let quiet = Broker::start_with(1, &[]);
    create_topic(&quiet, "q", 1, &[]);
    kcat_write(&quiet, "q", 0, &["a"]);
    assert!(
        !quiet.stderr_text().contains("request{"),
        "{}",
        quiet.stderr_text()
    );
}
