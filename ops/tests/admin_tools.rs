//! Issue #8: the admin CLI and debug tools, end to end against a live broker: `ringlog topic …`,
//! `produce`, `consume`, `cluster info`, `proxy` (between kcat and the broker) and
//! `dump-segment` (on segments the test damages), plus clap's suggestions for typos.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

const T: Duration = Duration::from_secs(60);

fn rl(args: &[&str]) -> Command {
    let mut c = Command::new(ringlog_bin());
    c.args(args).env_remove("RINGLOG_LOG");
    c
}

/// Runs `ringlog ARGS --brokers B` (when `b` is given); panics unless it exits 0.
fn ok(b: Option<&Broker>, args: &[&str], stdin: Option<&[u8]>) -> String {
    let mut c = rl(args);
    if let Some(b) = b {
        c.arg("--brokers").arg(b.bootstrap());
    }
    run_ok(c, stdin, T)
}

/// Runs it expecting a non-zero exit; returns (code, stdout, stderr).
fn fails(b: Option<&Broker>, args: &[&str]) -> (i32, String, String) {
    let mut c = rl(args);
    if let Some(b) = b {
        c.arg("--brokers").arg(b.bootstrap());
    }
    let desc = format!("{c:?}");
    let out = run_with_timeout(c, None, T);
    assert!(
        !out.status.success(),
        "{desc} should fail\n{}\n{}",
        out.stdout,
        out.stderr
    );
    (out.status.code().unwrap_or(-1), out.stdout, out.stderr)
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}):\n{s}"))
}

fn kcat_cmd(b: &str, args: &[&str]) -> Command {
    let mut c = Command::new(kcat());
    c.arg("-b").arg(b).args(args);
    c
}

// ---------------------------------------------------------------------------------------------

#[test]
fn topic_commands() {
    let b = Broker::start(2);

    let out = ok(
        Some(&b),
        &[
            "topic",
            "create",
            "orders",
            "--partitions",
            "3",
            "--config",
            "retention.ms=123456",
        ],
        None,
    );
    assert_eq!(out.trim(), "created topic orders with 3 partitions");
    let j = json(&ok(Some(&b), &["topic", "create", "audit", "--json"], None));
    assert_eq!(j["topic"], "audit");
    assert_eq!(j["created"], true);
    assert_eq!(j["partitions"], 1, "the broker's default num-partitions");

    // Refusals name the Kafka error and its message, and exit non-zero.
    let (code, _, err) = fails(Some(&b), &["topic", "create", "orders"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot create topic orders: TOPIC_ALREADY_EXISTS (36)"),
        "{err}"
    );
    assert!(err.contains("already exists"), "{err}");
    let (_, _, err) = fails(
        Some(&b),
        &["topic", "create", "x", "--config", "bogus.key=1"],
    );
    assert!(
        err.contains("INVALID_CONFIG (40)") && err.contains("bogus.key"),
        "{err}"
    );

    // list
    let out = ok(Some(&b), &["topic", "list"], None);
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["TOPIC", "PARTITIONS", "INTERNAL"], "{out}");
    assert!(lines.contains(&vec!["orders", "3", "false"]), "{out}");
    assert!(lines.contains(&vec!["audit", "1", "false"]), "{out}");
    assert!(
        lines
            .iter()
            .any(|l| l[0] == "__consumer_offsets" && l[2] == "true"),
        "{out}"
    );
    let j = json(&ok(Some(&b), &["topic", "list", "--json"], None));
    let orders = j
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == "orders")
        .expect("orders listed");
    assert_eq!(orders["partitions"], 3);
    assert_eq!(orders["internal"], false);

    // describe, after 5 messages to partition 1 and 2 to partition 2
    run_ok(
        kcat_cmd(&b.bootstrap(), &["-P", "-t", "orders", "-p", "1"]),
        Some(b"a\nb\nc\nd\ne\n"),
        T,
    );
    run_ok(
        kcat_cmd(&b.bootstrap(), &["-P", "-t", "orders", "-p", "2"]),
        Some(b"f\ng\n"),
        T,
    );
    let out = ok(Some(&b), &["topic", "describe", "orders"], None);
    assert!(out.starts_with("topic orders  id "), "{out}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.contains(&vec![
            "PARTITION",
            "LEADER",
            "EPOCH",
            "REPLICAS",
            "ISR",
            "OFFLINE",
            "EARLIEST",
            "LATEST"
        ]),
        "{out}"
    );
    // One replica, on node 1, in sync; none offline.
    assert!(
        rows.contains(&vec!["0", "1", "0", "1", "1", "-", "0", "0"]),
        "{out}"
    );
    assert!(
        rows.contains(&vec!["1", "1", "0", "1", "1", "-", "0", "5"]),
        "{out}"
    );
    assert!(
        rows.contains(&vec!["2", "1", "0", "1", "1", "-", "0", "2"]),
        "{out}"
    );
    assert!(
        rows.contains(&vec!["retention.ms", "123456", "topic"]),
        "{out}"
    );
    assert!(
        rows.contains(&vec!["cleanup.policy", "delete", "default"]),
        "{out}"
    );
    let j = json(&ok(
        Some(&b),
        &["topic", "describe", "orders", "--json"],
        None,
    ));
    assert_eq!(j["topic"], "orders");
    let parts = j["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[1]["partition"], 1);
    assert_eq!(parts[1]["earliest_offset"], 0);
    assert_eq!(parts[1]["latest_offset"], 5);
    assert_eq!(parts[2]["latest_offset"], 2);
    let cfg = |j: &Value, k: &str| -> (String, String) {
        let c = j["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == k)
            .unwrap_or_else(|| panic!("config {k} in {j}"));
        (
            c["value"].as_str().unwrap().into(),
            c["source"].as_str().unwrap().into(),
        )
    };
    assert_eq!(cfg(&j, "retention.ms"), ("123456".into(), "topic".into()));
    assert_eq!(cfg(&j, "segment.bytes").1, "default");

    // alter-config: set one, delete another (back to its default)
    let out = ok(
        Some(&b),
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "segment.ms=3600000",
            "--delete",
            "retention.ms",
        ],
        None,
    );
    assert_eq!(
        out.trim(),
        "altered configs of topic orders: set segment.ms=3600000; deleted retention.ms"
    );
    let j = json(&ok(
        Some(&b),
        &["topic", "describe", "orders", "--json"],
        None,
    ));
    assert_eq!(cfg(&j, "segment.ms"), ("3600000".into(), "topic".into()));
    assert_eq!(cfg(&j, "retention.ms").1, "default");
    let j = json(&ok(
        Some(&b),
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "retention.bytes=1000000",
            "--json",
        ],
        None,
    ));
    assert_eq!(j["set"]["retention.bytes"], "1000000");
    let (_, _, err) = fails(
        Some(&b),
        &["topic", "alter-config", "orders", "--set", "nope=1"],
    );
    assert!(
        err.contains("INVALID_CONFIG (40)") && err.contains("nope"),
        "{err}"
    );

    // add-partitions
    let out = ok(
        Some(&b),
        &["topic", "add-partitions", "orders", "--count", "5"],
        None,
    );
    assert_eq!(out.trim(), "topic orders now has 5 partitions");
    let j = json(&ok(
        Some(&b),
        &["topic", "add-partitions", "audit", "--count", "2", "--json"],
        None,
    ));
    assert_eq!(j["partitions"], 2);
    let (_, _, err) = fails(
        Some(&b),
        &["topic", "add-partitions", "orders", "--count", "2"],
    );
    assert!(err.contains("INVALID_PARTITIONS (37)"), "{err}");
    let j = json(&ok(
        Some(&b),
        &["topic", "describe", "orders", "--json"],
        None,
    ));
    assert_eq!(j["partitions"].as_array().unwrap().len(), 5);

    // delete
    let out = ok(Some(&b), &["topic", "delete", "audit"], None);
    assert_eq!(out.trim(), "deleted topic audit");
    let j = json(&ok(
        Some(&b),
        &["topic", "delete", "orders", "--json"],
        None,
    ));
    assert_eq!(j["deleted"], true);
    let (_, _, err) = fails(Some(&b), &["topic", "delete", "audit"]);
    assert!(err.contains("UNKNOWN_TOPIC_OR_PARTITION (3)"), "{err}");
    let (_, _, err) = fails(Some(&b), &["topic", "describe", "audit"]);
    assert!(err.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{err}");
    let j = json(&ok(Some(&b), &["topic", "list", "--json"], None));
    assert!(
        j.as_array()
            .unwrap()
            .iter()
            .all(|t| t["topic"] != "orders" && t["topic"] != "audit"),
        "{j}"
    );
}

/// (partition, key, value) lines consumed by kcat.
fn kcat_all(b: &Broker, topic: &str) -> Vec<(u32, String, String)> {
    let out = run_ok(
        kcat_cmd(
            &b.bootstrap(),
            &[
                "-C",
                "-t",
                topic,
                "-o",
                "beginning",
                "-e",
                "-f",
                "%p|%k|%s\n",
            ],
        ),
        None,
        T,
    );
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut it = l.splitn(3, '|');
            (
                it.next().unwrap().parse().unwrap(),
                it.next().unwrap().to_string(),
                it.next().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn produce_and_consume() {
    let b = Broker::start(2);
    ok(
        Some(&b),
        &["topic", "create", "keyed", "--partitions", "4"],
        None,
    );
    ok(
        Some(&b),
        &["topic", "create", "keyed-kcat", "--partitions", "4"],
        None,
    );
    ok(
        Some(&b),
        &["topic", "create", "plain", "--partitions", "4"],
        None,
    );

    // Keyed: Kafka's murmur2 partitioner, the same choice as librdkafka's murmur2_random
    // (the Java client's default).
    let keys: Vec<String> = (0..40).map(|i| format!("user-{i}")).collect();
    let input: String = keys.iter().map(|k| format!("{k}:value of {k}\n")).collect();
    let mut c = rl(&["produce", "keyed", "--key-separator", ":", "--json"]);
    c.arg("--brokers").arg(b.bootstrap());
    let j = json(&run_ok(c, Some(input.as_bytes()), T));
    assert_eq!(j["produced"], 40);
    assert_eq!(j["topic"], "keyed");
    run_ok(
        kcat_cmd(
            &b.bootstrap(),
            &[
                "-P",
                "-t",
                "keyed-kcat",
                "-K",
                ":",
                "-X",
                "partitioner=murmur2_random",
            ],
        ),
        Some(input.as_bytes()),
        T,
    );
    let ours: BTreeMap<String, u32> = kcat_all(&b, "keyed")
        .into_iter()
        .map(|(p, k, v)| {
            assert_eq!(v, format!("value of {k}"));
            (k, p)
        })
        .collect();
    let theirs: BTreeMap<String, u32> = kcat_all(&b, "keyed-kcat")
        .into_iter()
        .map(|(p, k, _)| (k, p))
        .collect();
    assert_eq!(ours.len(), 40);
    assert_eq!(
        ours, theirs,
        "ringlog produce and librdkafka's murmur2 agree"
    );
    for k in &keys {
        assert_eq!(ours[k], kafka_partition(k.as_bytes(), 4), "key {k}");
    }

    // Unkeyed: round-robin; acks 1 and 0 too. The summary goes to stderr.
    let mut c = rl(&["produce", "plain", "--acks", "1"]);
    c.arg("--brokers").arg(b.bootstrap());
    let out = run_with_timeout(c, Some(b"m0\nm1\nm2\nm3\nm4\nm5\nm6\nm7\n"), T);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(
        out.stderr.contains("produced 8 messages to plain (partition 0: 2 from offset 0, partition 1: 2 from offset 0, partition 2: 2 from offset 0, partition 3: 2 from offset 0)"),
        "{}",
        out.stderr
    );
    ok(
        Some(&b),
        &["produce", "plain", "--partition", "3", "--acks", "0"],
        Some(b"z0\nz1\n"),
    );
    let per: BTreeMap<u32, Vec<String>> =
        kcat_all(&b, "plain")
            .into_iter()
            .fold(BTreeMap::new(), |mut m, (p, _, v)| {
                m.entry(p).or_default().push(v);
                m
            });
    assert_eq!(per[&0], ["m0", "m4"]);
    assert_eq!(per[&1], ["m1", "m5"]);
    assert_eq!(
        per[&3],
        ["m3", "m7", "z0", "z1"],
        "acks=0 messages arrive too"
    );
    let (_, _, err) = fails(Some(&b), &["produce", "plain", "--partition", "9"]);
    assert!(err.contains("--partition 9"), "{err}");
    let (_, _, err) = fails(Some(&b), &["produce", "missing"]);
    assert!(err.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{err}");

    // consume: format, one partition, offsets, count, JSON.
    let out = ok(
        Some(&b),
        &[
            "consume",
            "plain",
            "--partition",
            "3",
            "--from-beginning",
            "--exit-at-end",
            "--format",
            "%t %p %o %k|%v",
        ],
        None,
    );
    assert_eq!(
        out,
        "plain 3 0 |m3\nplain 3 1 |m7\nplain 3 2 |z0\nplain 3 3 |z1\n"
    );
    let out = ok(
        Some(&b),
        &[
            "consume", "plain", "-p", "3", "--offset", "2", "-e", "-f", "%o:%v",
        ],
        None,
    );
    assert_eq!(out, "2:z0\n3:z1\n");
    let out = ok(
        Some(&b),
        &["consume", "plain", "--from-beginning", "--count", "3"],
        None,
    );
    assert_eq!(out.lines().count(), 3, "{out}");
    let out = ok(
        Some(&b),
        &["consume", "keyed", "--from-beginning", "-e", "--json"],
        None,
    );
    let recs: Vec<Value> = out.lines().map(json).collect();
    assert_eq!(recs.len(), 40);
    let r = recs.iter().find(|r| r["key"] == "user-7").expect("user-7");
    assert_eq!(r["value"], "value of user-7");
    assert_eq!(r["partition"], kafka_partition(b"user-7", 4));
    assert_eq!(r["topic"], "keyed");
    assert!(r["offset"].as_i64().unwrap() >= 0 && r["timestamp"].as_i64().unwrap() > 0);
    // By default a consumer starts at the end: nothing to print.
    let out = ok(Some(&b), &["consume", "plain", "-e"], None);
    assert_eq!(out, "");

    // Compressed batches (every codec, as kcat sends them) are decompressed.
    ok(
        Some(&b),
        &["topic", "create", "packed", "--partitions", "1"],
        None,
    );
    let big = "x".repeat(2000);
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let input = format!("{codec}-1 {big}\n{codec}-2 {big}\n");
        run_ok(
            kcat_cmd(
                &b.bootstrap(),
                &["-P", "-t", "packed", "-z", codec, "-X", "linger.ms=100"],
            ),
            Some(input.as_bytes()),
            T,
        );
    }
    let out = ok(
        Some(&b),
        &["consume", "packed", "--from-beginning", "-e", "-f", "%o %v"],
        None,
    );
    let got: Vec<String> = out
        .lines()
        .map(|l| {
            l.split_once(' ')
                .map(|(o, v)| format!("{o} {}", &v[..v.find(' ').unwrap()]))
                .unwrap()
        })
        .collect();
    assert_eq!(
        got,
        [
            "0 gzip-1",
            "1 gzip-2",
            "2 snappy-1",
            "3 snappy-2",
            "4 lz4-1",
            "5 lz4-2",
            "6 zstd-1",
            "7 zstd-2"
        ]
    );
    assert!(out.lines().all(|l| l.ends_with(&big)));
    // The batches really are compressed (dump-segment reads the live, fdatasync'd segment).
    let seg = b
        .data_dir()
        .join("topics/packed/p00000/00000000000000000000.log");
    let j = json(&ok(
        None,
        &["dump-segment", seg.to_str().unwrap(), "--json"],
        None,
    ));
    let codecs: Vec<&str> = j["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["compression"].as_str().unwrap())
        .collect();
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        assert!(codecs.contains(&codec), "{codec} batch in {codecs:?}");
    }

    // A consumer without --exit-at-end long-polls and prints messages that arrive later.
    let mut c = rl(&[
        "consume", "plain", "-p", "0", "--offset", "2", "--count", "2", "-f", "%v",
    ]);
    c.arg("--brokers").arg(b.bootstrap());
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out");
    let mut child = c
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    ok(
        Some(&b),
        &["produce", "plain", "-p", "0"],
        Some(b"late-1\nlate-2\n"),
    );
    let t0 = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > T {
            let _ = child.kill();
            let _ = child.wait();
            panic!("consume did not stop after --count 2");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(st.success());
    assert_eq!(
        std::fs::read_to_string(&out_path).unwrap(),
        "late-1\nlate-2\n"
    );
}

#[test]
fn cluster_info() {
    let b = Broker::start(2);
    ok(
        Some(&b),
        &["topic", "create", "t", "--partitions", "3"],
        None,
    );
    let cluster_id = std::fs::read_to_string(b.data_dir().join("cluster.id")).unwrap();
    let cluster_id = cluster_id.trim();
    let out = ok(Some(&b), &["cluster", "info"], None);
    assert!(
        out.contains(&format!("cluster id:  {cluster_id}\n")),
        "{out}"
    );
    assert!(out.contains("controller:  1\n"), "{out}");
    assert!(out.contains("topics:      3 (2 internal)\n"), "{out}");
    // 3 + one __consumer_offsets and one __transaction_state partition per core
    assert!(out.contains("partitions:  7\n"), "{out}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(rows.contains(&vec!["1", &b.bootstrap(), "-"]), "{out}");
    assert!(rows.contains(&vec!["0", "Produce", "0", "13"]), "{out}");
    assert!(rows.contains(&vec!["1", "Fetch", "4", "18"]), "{out}");
    assert!(rows.contains(&vec!["18", "ApiVersions", "0", "4"]), "{out}");

    let j = json(&ok(Some(&b), &["cluster", "info", "--json"], None));
    assert_eq!(j["cluster_id"], cluster_id);
    assert_eq!(j["controller_id"], 1);
    assert_eq!(j["brokers"][0]["port"], b.addr().port());
    assert_eq!(j["brokers"][0]["host"], "127.0.0.1");
    assert_eq!(j["topics"], 3);
    assert_eq!(j["partitions"], 7);
    let apis = j["api_versions"].as_array().unwrap();
    let meta = apis.iter().find(|a| a["name"] == "Metadata").unwrap();
    assert_eq!(
        (
            meta["api_key"].as_i64(),
            meta["min_version"].as_i64(),
            meta["max_version"].as_i64()
        ),
        (Some(3), Some(0), Some(13))
    );

    let (_, _, err) = fails(None, &["cluster", "info", "--brokers", "127.0.0.1:1"]);
    assert!(
        err.contains("cannot connect to broker 127.0.0.1:1"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// proxy
// ---------------------------------------------------------------------------------------------

struct Proxy {
    child: Child,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Proxy {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- proxy log ---\n{}", tail(&self.log(), 8000));
        }
    }
}

#[test]
fn proxy_between_kcat_and_broker() {
    let proxy_addr = format!("127.0.0.1:{}", free_port());
    // Clients go where Metadata points them: the broker advertises the proxy.
    let b = Broker::start_with(1, &["--advertise", &proxy_addr]);
    ok(
        Some(&b),
        &["topic", "create", "via", "--partitions", "2"],
        None,
    );

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("proxy.log");
    let child = rl(&[
        "proxy",
        "--listen",
        &proxy_addr,
        "--upstream",
        &b.bootstrap(),
    ])
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap())
    .spawn()
    .unwrap();
    let p = Proxy {
        child,
        log,
        _dir: dir,
    };
    let t0 = Instant::now();
    while !p.log().contains("ringlog proxy ready") {
        assert!(t0.elapsed() < T, "proxy not ready:\n{}", p.log());
        std::thread::sleep(Duration::from_millis(20));
    }

    run_ok(
        kcat_cmd(&proxy_addr, &["-P", "-t", "via", "-K", ":"]),
        Some(b"k1:hello\nk2:world\nk3:again\n"),
        T,
    );
    let out = run_ok(
        kcat_cmd(
            &proxy_addr,
            &["-C", "-t", "via", "-o", "beginning", "-e", "-f", "%k=%s\n"],
        ),
        None,
        T,
    );
    let mut got: Vec<&str> = out.lines().collect();
    got.sort();
    assert_eq!(got, ["k1=hello", "k2=world", "k3=again"]);
    // And the ringlog CLI through the proxy.
    let out = ok(
        None,
        &[
            "consume",
            "via",
            "--from-beginning",
            "-e",
            "-f",
            "%k",
            "--brokers",
            &proxy_addr,
        ],
        None,
    );
    assert_eq!(out.lines().count(), 3, "{out}");

    let text = p.log();
    for api in ["ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets"] {
        assert!(
            text.contains(&format!("request {api} ")),
            "request {api} logged:\n{text}"
        );
        assert!(
            text.contains(&format!("response {api} ")),
            "response {api} logged:\n{text}"
        );
    }
    assert!(text.contains("client_id=rdkafka"), "{text}");
    assert!(text.contains("client_id=ringlog-cli"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("request Produce "))
        .unwrap();
    assert!(
        line.contains("version=") && line.contains("correlation_id="),
        "{line}"
    );
    let line = text
        .lines()
        .find(|l| l.contains("response Fetch "))
        .unwrap();
    assert!(line.contains("size="), "{line}");

    // A malformed frame is logged and its connection closed; the proxy keeps serving.
    let mut s = TcpStream::connect(&proxy_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0, 0])
        .unwrap(); // api key 999
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "connection closed");
    let t0 = Instant::now();
    while !p.log().contains("unknown API key 999") {
        assert!(t0.elapsed() < T, "malformed frame logged:\n{}", p.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(p.log().contains("malformed frame"), "{}", p.log());
    let j = json(&ok(
        None,
        &["cluster", "info", "--json", "--brokers", &proxy_addr],
        None,
    ));
    assert_eq!(
        j["brokers"][0]["port"].as_u64(),
        Some(proxy_addr.rsplit(':').next().unwrap().parse().unwrap())
    );
}

// ---------------------------------------------------------------------------------------------
// dump-segment
// ---------------------------------------------------------------------------------------------

#[test]
fn dump_segment_reports_batches_and_damage() {
    let mut b = Broker::start(1);
    ok(
        Some(&b),
        &["topic", "create", "seg", "--partitions", "1"],
        None,
    );
    // Three produce runs: batches of 2, 3 and 1 records.
    ok(
        Some(&b),
        &["produce", "seg", "-K", ":"],
        Some(b"a:1\nb:2\n"),
    );
    ok(Some(&b), &["produce", "seg"], Some(b"3\n4\n5\n"));
    ok(Some(&b), &["produce", "seg"], Some(b"6\n"));
    b.terminate();

    let pdir = b.data_dir().join("topics/seg/p00000");
    let log = pdir.join("00000000000000000000.log");
    let out = ok(None, &["dump-segment", log.to_str().unwrap()], None);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[1][..6],
        [
            "POSITION",
            "BASE-OFFSET",
            "LAST-OFFSET",
            "COUNT",
            "SIZE",
            "CRC"
        ],
        "{out}"
    );
    assert_eq!(rows[2][1..4], ["0", "1", "2"], "{out}");
    assert_eq!(rows[3][1..4], ["2", "4", "3"], "{out}");
    assert_eq!(rows[4][1..4], ["5", "5", "1"], "{out}");
    assert!(
        rows[2..5]
            .iter()
            .all(|r| r[5] == "valid" && r[6] == "none" && r[9] == "-1"),
        "{out}"
    );
    assert!(out.contains("3 batches, 6 records, offsets 0..=5"), "{out}");
    assert!(out.contains("valid to the end of the file"), "{out}");

    let j = json(&ok(
        None,
        &["dump-segment", log.to_str().unwrap(), "--json"],
        None,
    ));
    assert_eq!(j["kind"], "log");
    assert_eq!(j["base_offset"], 0);
    assert_eq!(j["next_offset"], 6);
    assert_eq!(j["stop"], Value::Null);
    let batches = j["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 3);
    let pos2 = batches[1]["position"].as_u64().unwrap();
    let pos3 = batches[2]["position"].as_u64().unwrap();
    assert_eq!(pos2, batches[0]["size"].as_u64().unwrap());
    assert_eq!(batches[1]["crc_valid"], true);
    assert_eq!(batches[1]["producer_id"], -1);
    assert_eq!(batches[1]["base_sequence"], -1);
    assert_eq!(batches[1]["compression"], "none");
    assert!(batches[1]["max_timestamp"].as_i64().unwrap() > 0);

    // The indexes, checked against the log.
    let j = json(&ok(
        None,
        &[
            "dump-segment",
            pdir.join("00000000000000000000.index").to_str().unwrap(),
            "--json",
        ],
        None,
    ));
    assert_eq!(j["checked_against_log"], true);
    assert_eq!(j["stop"], Value::Null);
    let e = j["entries"].as_array().unwrap();
    assert_eq!(e.len(), 3);
    assert_eq!(
        (e[1]["offset"].as_u64(), e[1]["log_position"].as_u64()),
        (Some(2), Some(pos2))
    );
    assert!(e[2]["commit_time_ms"].as_i64() >= e[1]["commit_time_ms"].as_i64());
    let out = ok(
        None,
        &[
            "dump-segment",
            pdir.join("00000000000000000000.index").to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.contains("3 entries") && out.contains("LOG-POSITION"),
        "{out}"
    );
    let j = json(&ok(
        None,
        &[
            "dump-segment",
            pdir.join("00000000000000000000.timeindex")
                .to_str()
                .unwrap(),
            "--json",
        ],
        None,
    ));
    assert_eq!(j["kind"], "timeindex");
    assert!(j["entry_count"].as_u64().unwrap() >= 1, "{j}");
    assert_eq!(j["stop"], Value::Null);

    // Damage copies of the files (same names, in another dir) and ask where and why.
    let original = std::fs::read(&log).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("00000000000000000000.log");
    let bad_s = bad.to_str().unwrap();

    // 1. A flipped byte inside batch 2's records: CRC mismatch at batch 2's position.
    let mut bytes = original.clone();
    bytes[pos2 as usize + 70] ^= 0x5a;
    std::fs::write(&bad, &bytes).unwrap();
    let (code, out, err) = fails(None, &["dump-segment", bad_s]);
    assert_eq!(code, 1);
    assert!(
        out.contains(&format!(
            "DAMAGED at byte {pos2}: corrupt batch: record batch CRC-32C mismatch"
        )),
        "{out}"
    );
    assert!(
        out.contains("claims base offset 2; valid records end before offset 2"),
        "{out}"
    );
    assert!(err.contains(&format!("is damaged at byte {pos2}")), "{err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.iter()
            .any(|r| r.first() == Some(&pos2.to_string().as_str()) && r.get(5) == Some(&"INVALID")),
        "{out}"
    );
    let mut c = rl(&["dump-segment", bad_s, "--json"]);
    c.stderr(Stdio::null());
    let o = run_with_timeout(c, None, T);
    assert!(!o.status.success());
    let j = json(&o.stdout);
    assert_eq!(j["stop"]["position"], pos2);
    assert_eq!(j["stop"]["damage"], true);
    assert_eq!(j["stop"]["batch_base_offset"], 2);
    assert!(
        j["stop"]["reason"]
            .as_str()
            .unwrap()
            .contains("CRC-32C mismatch"),
        "{j}"
    );
    assert_eq!(j["valid_bytes"], pos2);
    assert_eq!(j["batch_count"], 1);

    // 2. A torn write: the file ends inside batch 3.
    std::fs::write(&bad, &original[..pos3 as usize + 20]).unwrap();
    let (_, out, _) = fails(None, &["dump-segment", bad_s]);
    assert!(
        out.contains(&format!("DAMAGED at byte {pos3}: partial batch")),
        "{out}"
    );

    // 3. Batch 3 claims base offset 9 (outside the CRC): an offset gap.
    let mut bytes = original.clone();
    bytes[pos3 as usize..pos3 as usize + 8].copy_from_slice(&9i64.to_be_bytes());
    std::fs::write(&bad, &bytes).unwrap();
    let (_, out, _) = fails(None, &["dump-segment", bad_s]);
    assert!(
        out.contains(&format!(
            "DAMAGED at byte {pos3}: offset gap: expected base offset 5, found 9"
        )),
        "{out}"
    );

    // 4. A batch length that is too small.
    let mut bytes = original.clone();
    bytes[pos2 as usize + 8..pos2 as usize + 12].copy_from_slice(&10i32.to_be_bytes());
    std::fs::write(&bad, &bytes).unwrap();
    let (_, out, _) = fails(None, &["dump-segment", bad_s]);
    assert!(
        out.contains(&format!(
            "DAMAGED at byte {pos2}: corrupt batch: batchLength 10 below the v2 minimum"
        )),
        "{out}"
    );

    // 5. Zero padding after the last batch is the end of the data, not damage.
    let mut bytes = original.clone();
    bytes.extend_from_slice(&[0u8; 4096]);
    std::fs::write(&bad, &bytes).unwrap();
    let out = ok(None, &["dump-segment", bad_s], None);
    assert!(
        out.contains(&format!(
            "valid up to byte {}; zero padding",
            original.len()
        )),
        "{out}"
    );

    // 6. An index entry that goes backwards.
    let idx = std::fs::read(pdir.join("00000000000000000000.index")).unwrap();
    let mut bytes = idx.clone();
    bytes[32..36].copy_from_slice(&1u32.to_be_bytes());
    let bad_idx = dir.path().join("00000000000000000000.index");
    std::fs::write(&bad_idx, &bytes).unwrap();
    std::fs::write(&bad, &original).unwrap();
    let (_, out, _) = fails(None, &["dump-segment", bad_idx.to_str().unwrap()]);
    assert!(
        out.contains(
            "DAMAGED at byte 32: entry 2: relative offset 1 does not increase (previous 2)"
        ),
        "{out}"
    );
    // 7. An index entry pointing at the wrong place in the log.
    let mut bytes = idx.clone();
    bytes[20..24].copy_from_slice(&(pos2 as u32 + 1).to_be_bytes());
    std::fs::write(&bad_idx, &bytes).unwrap();
    let (_, out, _) = fails(None, &["dump-segment", bad_idx.to_str().unwrap()]);
    assert!(
        out.contains("DAMAGED at byte 16: entry 1: entry for offset 2 points at log position"),
        "{out}"
    );

    // Not a segment file.
    let (_, _, err) = fails(
        None,
        &["dump-segment", dir.path().join("x.txt").to_str().unwrap()],
    );
    assert!(err.contains("cannot read"), "{err}");
}

#[test]
fn typos_get_suggestions() {
    let (code, _, err) = fails(None, &["topc", "list"]);
    assert_eq!(code, 2);
    assert!(err.contains("unrecognized subcommand 'topc'"), "{err}");
    assert!(
        err.contains("tip: a similar subcommand exists: 'topic'"),
        "{err}"
    );
    let (_, _, err) = fails(None, &["dump-segmnt", "x.log"]);
    assert!(
        err.contains("tip: a similar subcommand exists: 'dump-segment'"),
        "{err}"
    );
    let (_, _, err) = fails(None, &["topic", "lst"]);
    assert!(
        err.contains("tip: a similar subcommand exists: 'list'"),
        "{err}"
    );
    let (_, _, err) = fails(None, &["topic", "create", "x", "--partition", "3"]);
    assert!(err.contains("unexpected argument '--partition'"), "{err}");
    assert!(
        err.contains("tip: a similar argument exists: '--partitions'"),
        "{err}"
    );
    let (_, _, err) = fails(None, &["consume", "t", "--from-begining"]);
    assert!(
        err.contains("tip: a similar argument exists: '--from-beginning'"),
        "{err}"
    );
    let (_, _, err) = fails(None, &["produce", "t", "--key-seperator", ":"]);
    assert!(
        err.contains("tip: a similar argument exists: '--key-separator'"),
        "{err}"
    );
    let (_, _, err) = fails(None, &["produce", "t", "--acks", "2"]);
    assert!(
        err.contains("invalid value '2' for '--acks <ACKS>'") && err.contains("all, 1, 0"),
        "{err}"
    );
    let (_, _, err) = fails(None, &["topic", "alter-config", "t"]);
    assert!(err.contains("--set") && err.contains("--delete"), "{err}");
}

/// One Produce request touching 1,000 partitions on one core (issue #23: it overflowed
/// glommio's i16 waker count through a hand-written join and panicked the core, and SIGTERM
/// then never finished). It must succeed, and the broker must still stop cleanly.
#[test]
fn one_produce_request_for_a_thousand_partitions() {
    let mut b = Broker::start(1);
    // Small segments: each partition preallocates min(32 MiB, segment.bytes) plus its indexes
    // at its first append, so 1 GiB segments would reserve 34 GB of disk for 1,000 of them.
    create_topic(&b, "t3", 1_000, &[("segment.bytes", "1048576")]);
    let lines: String = (0..20_000).map(|i| format!("line-{i}\n")).collect();
    let mut c = rl(&["produce", "t3"]);
    c.arg("--brokers").arg(b.bootstrap());
    let out = run_with_timeout(c, Some(lines.as_bytes()), T);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(
        out.stderr.contains("produced 20000 messages to t3"),
        "{}",
        tail(&out.stderr, 2_000)
    );
    b.assert_alive();
    b.terminate();
}
