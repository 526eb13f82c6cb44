//! Barrier cuts (issue #15, seed 003) end to end with the real binary and real clients:
//! a cut triggered under concurrent acks=all produce into 3 topics on both cores sits at
//! every partition's marker (`ringlog barrier verify`), consumers below the cut get exactly
//! the records before the marker, and no consumer (kcat, confluent-kafka, kafka-python) ever
//! sees a marker; a partition that refuses its marker makes the cut partial; SIGKILL during
//! injections leaves every epoch finished and the earlier cuts intact; the interval trigger,
//! the CLI's refusals and exit codes.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::ProduceResponse;
use serde_json::Value;
use support::wire::{call, produce_req};
use support::*;

const KAFKA_STORAGE_ERROR: i16 = 56;

/// `ringlog barrier ARGS --brokers B`: (exit code, stdout, stderr).
fn barrier(broker: &Broker, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(ringlog_bin());
    c.arg("barrier")
        .args(args)
        .args(["--brokers", &broker.bootstrap()]);
    let out = run_with_timeout(c, None, Duration::from_secs(90));
    (out.status.code().unwrap_or(-1), out.stdout, out.stderr)
}

fn barrier_ok(broker: &Broker, args: &[&str]) -> String {
    let (code, out, err) = barrier(broker, args);
    assert_eq!(code, 0, "ringlog barrier {args:?}: {out}{err}");
    out
}

fn barrier_json(broker: &Broker, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let out = barrier_ok(broker, &a);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Every retained cut of `group`: epoch → (status, offsets by (topic, partition), missing).
type Cuts = BTreeMap<
    i64,
    (
        String,
        BTreeMap<(String, i32), i64>,
        BTreeSet<(String, i32)>,
    ),
>;

fn cuts(broker: &Broker, group: &str) -> Cuts {
    let v = barrier_json(broker, &["list", group]);
    v.as_array()
        .expect("a list of cuts")
        .iter()
        .map(|c| {
            let mut offsets = BTreeMap::new();
            for t in c["offsets"].as_array().unwrap() {
                for p in t["partitions"].as_array().unwrap() {
                    offsets.insert(
                        (
                            t["topic"].as_str().unwrap().to_string(),
                            p["partition"].as_i64().unwrap() as i32,
                        ),
                        p["offset"].as_i64().unwrap(),
                    );
                }
            }
            let missing = c["missing"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    (
                        m["topic"].as_str().unwrap().to_string(),
                        m["partition"].as_i64().unwrap() as i32,
                    )
                })
                .collect();
            (
                c["epoch"].as_i64().unwrap(),
                (c["status"].as_str().unwrap().to_string(), offsets, missing),
            )
        })
        .collect()
}

fn admin_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// `ringlog barrier trigger GROUP --json` running on its own (its answer is the cut, which
/// comes once the injection is done).
fn trigger_in_background(broker: &Broker, group: &str) -> std::process::Child {
    let mut c = Command::new(ringlog_bin());
    c.args([
        "barrier",
        "trigger",
        group,
        "--json",
        "--brokers",
        &broker.bootstrap(),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c.spawn().expect("ringlog barrier trigger starts")
}

/// Waits until the broker counts `n` injections started since it started (each counted once
/// its injection-start record is durable).
fn wait_started(admin: &str, n: f64) {
    let t0 = Instant::now();
    loop {
        let metrics = http_request(admin, "GET", "/metrics");
        if metric_sum(&metrics, "barrier_epochs_started_total") >= n {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{n} injections not started: {metrics}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The last published epoch of `group` (0: none).
fn last_epoch(broker: &Broker, group: &str) -> i64 {
    let d = barrier_json(broker, &["describe", group]);
    d[0]["last_epoch"].as_i64().unwrap_or_else(|| panic!("{d}"))
}

/// Acks of the producers: (topic, partition) → offsets acknowledged.
type Acked = BTreeMap<(String, i32), BTreeSet<i64>>;

/// A consumer's output (`barrier_consume.py` or kcat): (topic, partition) → offsets.
fn parse_records(out: &str) -> Acked {
    let mut got: Acked = BTreeMap::new();
    for l in out.lines().filter(|l| l.starts_with("REC ")) {
        let f: Vec<&str> = l.splitn(5, ' ').collect();
        let offset: i64 = f[3].parse().unwrap();
        let fresh = got
            .entry((f[1].to_string(), f[2].parse().unwrap()))
            .or_default()
            .insert(offset);
        assert!(fresh, "offset {offset} handed out twice: {l}");
    }
    got
}

#[test]
fn a_cut_under_concurrent_produce_sits_at_every_marker_and_no_consumer_sees_one() {
    let broker = Broker::start_with(2, &["--barrier-injection-timeout-ms", "10000"]);
    let topics = ["orders", "payments", "audit"];
    for t in topics {
        create_topic(&broker, t, 4, &[]);
    }
    barrier_ok(
        &broker,
        &[
            "define",
            "snap",
            "--topics",
            "orders,payments,audit",
            "--interval",
            "1h",
            "--retained-cuts",
            "10",
        ],
    );
    // Three acks=all producers, one per topic, for 5 s; two cuts while they run.
    let mut producers: Vec<_> = topics
        .iter()
        .map(|t| {
            let mut c = python_cmd("crash_producer.py", &[&broker.bootstrap(), t, t, "5"]);
            c.stdout(Stdio::piped()).stderr(Stdio::null());
            c.spawn().expect("producer starts")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let first = barrier_json(&broker, &["trigger", "snap"]);
    assert_eq!(first["status"], "complete", "{first}");
    std::thread::sleep(Duration::from_millis(1000));
    let second = barrier_json(&broker, &["trigger", "snap"]);
    assert_eq!(second["status"], "complete", "{second}");
    assert_eq!(
        second["epoch"].as_i64(),
        first["epoch"].as_i64().map(|e| e + 1)
    );
    let mut acked: Acked = BTreeMap::new();
    for (t, p) in topics.iter().zip(producers.iter_mut()) {
        let out = BufReader::new(p.stdout.take().unwrap());
        for l in out.lines().map_while(Result::ok) {
            if let Some(rest) = l.strip_prefix("ACK ") {
                let f: Vec<&str> = rest.split(' ').collect();
                acked
                    .entry((t.to_string(), f[0].parse().unwrap()))
                    .or_default()
                    .insert(f[1].parse().unwrap());
            } else if l.starts_with("FAILED") {
                panic!("a produce failed: {l}");
            }
        }
        assert!(p.wait().unwrap().success());
    }
    let cuts = cuts(&broker, "snap");
    assert_eq!(cuts.len(), 2, "{cuts:?}");
    for (epoch, (status, offsets, missing)) in &cuts {
        assert_eq!(status, "complete", "epoch {epoch}");
        assert!(missing.is_empty());
        assert_eq!(
            offsets.len(),
            12,
            "every partition of the 3 topics: {offsets:?}"
        );
    }
    let out = barrier_ok(&broker, &["verify", "snap"]);
    assert!(out.contains("24 marker(s), 0 mismatch(es)"), "{out}");
    // The markers took exactly the cut offsets: every other offset below the high
    // watermark is an acknowledged record, and no acknowledged record is at a cut offset.
    let markers: BTreeMap<(String, i32), BTreeSet<i64>> =
        cuts.values()
            .fold(BTreeMap::new(), |mut m, (_, offsets, _)| {
                for (k, o) in offsets {
                    m.entry(k.clone()).or_default().insert(*o);
                }
                m
            });
    for (k, offs) in &markers {
        let a = acked.get(k).cloned().unwrap_or_default();
        assert!(
            a.is_disjoint(offs),
            "{k:?}: a record acknowledged at a marker's offset"
        );
        let max = a.iter().chain(offs).max().copied().unwrap_or(-1);
        let all: BTreeSet<i64> = a.union(offs).copied().collect();
        assert_eq!(
            all,
            (0..=max).collect(),
            "{k:?}: records and markers fill the log"
        );
    }
    // No consumer sees a marker, and each gets every acknowledged record once: below each
    // cut offset exactly the records before the marker.
    for client in ["confluent-kafka", "kafka-python"] {
        let mut args = vec![broker.bootstrap(), client.to_string()];
        args.extend(topics.iter().map(|t| t.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run_python("barrier_consume.py", &args, &[], Duration::from_secs(120));
        let got = parse_records(&out);
        assert_eq!(
            got, acked,
            "{client}: every acknowledged record once, no marker"
        );
        for (k, offs) in &markers {
            for cut in offs {
                let below: BTreeSet<i64> = got[k].range(..cut).copied().collect();
                let before: BTreeSet<i64> = acked[k].range(..cut).copied().collect();
                assert_eq!(below, before, "{client} {k:?} below cut offset {cut}");
            }
        }
    }
    for t in topics {
        for p in 0..4 {
            let mut c = Command::new(kcat());
            c.args([
                "-b",
                &broker.bootstrap(),
                "-C",
                "-t",
                t,
                "-p",
                &p.to_string(),
            ])
            .args(["-o", "beginning", "-e", "-q", "-f", "REC %t %p %o %s\n"]);
            let out = run_ok(c, None, Duration::from_secs(60));
            let got = parse_records(&out);
            let want = acked.get(&(t.to_string(), p)).cloned().unwrap_or_default();
            assert_eq!(
                got.get(&(t.to_string(), p)).cloned().unwrap_or_default(),
                want,
                "kcat {t}/{p}: every acknowledged record once, no marker"
            );
        }
    }
    // The figures of seed 003's metrics.
    drop(broker);
}

#[test]
fn a_partition_that_refuses_its_marker_makes_the_cut_partial() {
    let admin = admin_addr();
    let broker = Broker::start_with(
        2,
        &[
            "--metrics-listen",
            &admin,
            "--enable-fault-injection",
            "--barrier-injection-timeout-ms",
            "1500",
        ],
    );
    // The internal topics placed first (one partition per core each): p0 is on core 0.
    create_topic(&broker, "refuse", 2, &[]);
    barrier_ok(
        &broker,
        &["define", "part", "--topics", "refuse", "--interval", "1h"],
    );
    kcat_write(&broker, "refuse", 0, &["a", "b"]);
    kcat_write(&broker, "refuse", 1, &["c"]);
    let ok = barrier_json(&broker, &["trigger", "part"]);
    assert_eq!(ok["status"], "complete", "{ok}");
    // Poison refuse/0: its next fdatasync fails (nothing else on core 0 writes meanwhile).
    poison_partition_0(&broker, &admin, "refuse");
    let first = trigger_in_background(&broker, "part");
    wait_started(&admin, 2.0);
    // One injection of a group at a time: refused while refuse/0's marker is retried.
    let (code, _, err) = barrier(&broker, &["trigger", "part"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("BARRIER_INJECTION_IN_PROGRESS (1000)"),
        "{err}"
    );
    // The first trigger's answer is the cut, once its retries are spent.
    let out = first.wait_with_output().expect("the trigger ends");
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{answer}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["status"], "partial", "{answer}");
    assert_eq!(
        answer["missing"],
        serde_json::json!([{"topic": "refuse", "partition": 0}]),
        "{answer}"
    );
    let epoch = answer["epoch"].as_i64().unwrap();
    let all = cuts(&broker, "part");
    let (status, offsets, missing) = &all[&epoch];
    assert_eq!(status, "partial");
    assert_eq!(missing, &BTreeSet::from([("refuse".to_string(), 0)]));
    assert_eq!(
        offsets.keys().cloned().collect::<Vec<_>>(),
        vec![("refuse".to_string(), 1)]
    );
    // The markers that were written are where the cut says.
    let out = barrier_ok(&broker, &["verify", "part"]);
    assert!(out.contains("0 mismatch(es)"), "{out}");
    assert_eq!(
        last_epoch(&broker, "part"),
        epoch,
        "the last published epoch"
    );
    let metrics = http_request(&admin, "GET", "/metrics");
    assert_eq!(
        metric_sum(&metrics, "barrier_epochs_started_total"),
        2.0,
        "{metrics}"
    );
    assert_eq!(metric_sum(&metrics, "barrier_epochs_committed_total"), 1.0);
    assert_eq!(
        metric_sum(&metrics, "barrier_epochs_published_partial_total"),
        1.0
    );
    assert_eq!(metric_sum(&metrics, "barrier_markers_written_total"), 3.0);
    assert_eq!(metric_sum(&metrics, "barrier_latest_epoch"), epoch as f64);
    assert_eq!(metric_sum(&metrics, "barrier_groups_coordinated"), 1.0);
    assert_eq!(
        metric_sum(&metrics, "barrier_injection_duration_seconds_count"),
        2.0
    );
}

/// SIGKILL at random moments of injections (half of them held open by a refusing partition):
/// after each restart the epoch the trigger was told of is finished (complete or partial),
/// the group and every earlier cut are intact, and verify finds every marker.
#[test]
fn sigkill_during_injection_leaves_every_epoch_finished() {
    const TRIALS: u64 = 10;
    let admin = admin_addr();
    let args = [
        "--metrics-listen",
        admin.as_str(),
        "--enable-fault-injection",
        "--barrier-injection-timeout-ms",
        "3000",
    ];
    let mut broker = Broker::start_with(2, &args);
    create_topic(&broker, "k", 2, &[]);
    barrier_ok(
        &broker,
        &[
            "define",
            "kill",
            "--topics",
            "k",
            "--interval",
            "1h",
            "--retained-cuts",
            "100",
        ],
    );
    let mut rng = Rng::from_env_or_time("BARRIER_KILL_SEED");
    let mut seen: Cuts = BTreeMap::new();
    for trial in 0..TRIALS {
        kcat_write(&broker, "k", 0, &["x"]);
        kcat_write(&broker, "k", 1, &["y"]);
        let held = trial % 2 == 0;
        if held {
            poison_partition_0(&broker, &admin, "k");
        }
        // Epochs are allocated in order: the next one after the last published.
        let epoch = last_epoch(&broker, "kill") + 1;
        let mut trigger = trigger_in_background(&broker, "kill");
        wait_started(&admin, 1.0);
        let delay = if held {
            rng.range(0, 2500)
        } else {
            rng.range(0, 20)
        };
        std::thread::sleep(Duration::from_millis(delay));
        broker.kill();
        // The trigger loses its broker (or got its cut just before).
        let _ = trigger.wait();
        broker.restart();
        // Finished after the restart: the epoch is published.
        let t0 = Instant::now();
        loop {
            let d = barrier_json(&broker, &["describe", "kill"]);
            if d[0]["last_epoch"].as_i64() == Some(epoch) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "trial {trial}: epoch {epoch} not finished: {d}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let now = cuts(&broker, "kill");
        for (e, c) in &seen {
            assert_eq!(now.get(e), Some(c), "trial {trial}: earlier cut {e} intact");
        }
        let (status, offsets, missing) = &now[&epoch];
        assert!(status == "complete" || status == "partial", "{status}");
        assert_eq!(
            offsets.len() + missing.len(),
            2,
            "every target accounted for"
        );
        if held {
            // Killed while k/0 refused: finished after the restart, without k/0's marker.
            assert_eq!(status, "partial", "trial {trial}");
            assert_eq!(
                missing,
                &BTreeSet::from([("k".to_string(), 0)]),
                "trial {trial}"
            );
        } else if status == "complete" {
            assert!(missing.is_empty());
        }
        eprintln!("trial {trial}: killed {delay} ms after epoch {epoch} started; {status}");
        let out = barrier_ok(&broker, &["verify", "kill"]);
        assert!(out.contains("0 mismatch(es)"), "trial {trial}: {out}");
        seen = now;
    }
    assert_eq!(seen.len() as u64, TRIALS);
    let d = barrier_json(&broker, &["describe", "kill"]);
    assert_eq!(
        d[0]["topics"],
        serde_json::json!(["k"]),
        "the group is intact: {d}"
    );
}

#[test]
fn the_interval_triggers_and_the_cli_refuses_bad_definitions_with_exit_codes() {
    let broker = Broker::start(2);
    create_topic(&broker, "tick", 2, &[]);
    // Refused (exit 1) with the metastore's reason; usage (exit 2) by the parser.
    let (code, _, err) = barrier(
        &broker,
        &["define", "g", "--topics", "tick", "--interval", "10ms"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("interval_ms 10"), "{err}");
    let (code, _, err) = barrier(&broker, &["define", "g", "--topics", "nope"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("'nope' does not exist"), "{err}");
    let (code, _, err) = barrier(&broker, &["define", "g", "--topics", "__consumer_offsets"]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = barrier(&broker, &["define", "g"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = barrier(&broker, &["trigger", "undefined"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("RESOURCE_NOT_FOUND"), "{err}");
    let (code, _, err) = barrier(&broker, &["delete", "undefined"]);
    assert_eq!(code, 1, "{err}");
    // Every interval_ms a cut, epochs in order.
    kcat_write(&broker, "tick", 0, &["a"]);
    barrier_ok(
        &broker,
        &[
            "define",
            "every",
            "--topics",
            "tick",
            "--interval",
            "1s",
            "--retained-cuts",
            "3",
        ],
    );
    let t0 = Instant::now();
    let mut got = cuts(&broker, "every");
    while got.keys().next_back().copied().unwrap_or(0) < 4 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "interval cuts: {got:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
        got = cuts(&broker, "every");
    }
    // Only the newest retained_cuts are kept.
    assert!(got.len() <= 3, "{got:?}");
    let epochs: Vec<i64> = got.keys().copied().collect();
    assert!(epochs.windows(2).all(|w| w[1] == w[0] + 1), "{epochs:?}");
    let out = barrier_ok(&broker, &["verify", "every"]);
    assert!(out.contains("0 mismatch(es)"), "{out}");
    barrier_ok(&broker, &["delete", "every"]);
    let (code, _, err) = barrier(&broker, &["list", "every"]);
    assert_eq!(code, 1, "a deleted group has no cuts: {err}");
}

/// A verify mismatch exits 3: the records below a cut are deleted (DeleteRecords), so the
/// fetch at the cut offset finds no marker.
#[test]
fn verify_exits_3_when_a_marker_is_not_at_its_cut_offset() {
    let broker = Broker::start(1);
    create_topic(&broker, "v", 1, &[]);
    kcat_write(&broker, "v", 0, &["a", "b"]);
    barrier_ok(
        &broker,
        &["define", "ver", "--topics", "v", "--interval", "1h"],
    );
    let t = barrier_json(&broker, &["trigger", "ver"]);
    assert_eq!(t["status"], "complete");
    kcat_write(&broker, "v", 0, &["c"]);
    run_python(
        "admin.py",
        &["delete-records", &broker.addr().to_string(), "v", "0", "3"],
        &[],
        Duration::from_secs(60),
    );
    let (code, out, err) = barrier(&broker, &["verify", "ver"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("MISMATCH epoch 1: v/0@2"), "{out}");
}

/// The barrier APIs are not advertised; a barrier frame that lies about its counts or stops
/// short closes its connection (the broker reads no further and allocates by no count), and
/// the broker goes on answering good ones.
#[test]
fn hostile_barrier_frames_close_only_their_connection() {
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
    use kfc4::wire::{self, BarrierRequest, BarrierResponse, DescribeBarrierGroupsRequest};
    use std::io::{Read, Write};
    let broker = Broker::start(1);
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let v: ApiVersionsResponse = call(&mut s, 18, 3, 1, &ApiVersionsRequest::default());
    assert!(
        v.api_keys
            .iter()
            .all(|k| !(1010..=1014).contains(&k.api_key)),
        "not advertised"
    );
    // AlterBarrierGroups whose groups array claims 2^31 elements, in a 20-byte frame.
    let mut body = Vec::new();
    body.extend_from_slice(&1010i16.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&2i32.to_be_bytes());
    body.extend_from_slice(&(-1i16).to_be_bytes()); // client id: null
    body.push(0); // header tagged fields
    body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // compact array of 2^31 - 2
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    s.write_all(&frame).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "the connection is closed");
    // A truncated Describe, then a good one on a fresh connection.
    let good = wire::encode_request_frame(
        5,
        Some("t"),
        &BarrierRequest::Describe(DescribeBarrierGroupsRequest { groups: vec![] }),
    );
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut short = good[..good.len() - 1].to_vec();
    let short_len = (short.len() - 4) as i32;
    short[..4].copy_from_slice(&short_len.to_be_bytes());
    s.write_all(&short).unwrap();
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "the connection is closed");
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&good).unwrap();
    let answer = support::wire::read_frame(&mut s, "DescribeBarrierGroups");
    let (corr, resp) = wire::decode_response_frame(1011, &answer).unwrap();
    assert_eq!(corr, 5);
    assert_eq!(
        resp,
        BarrierResponse::Describe(Default::default()),
        "no groups yet"
    );
}

/// The streams library's cut reader (seed 003) against a live broker: it reads
/// `__barrier_state` with assign/seek/poll, returns the newest complete cut with the offsets
/// the broker lists, never a partial one, and on later calls only what arrived since (across
/// a broker restart).
#[test]
fn the_cut_reader_returns_complete_cuts_only() {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::BaseConsumer;
    let admin = admin_addr();
    let mut broker = Broker::start_with(
        2,
        &[
            "--metrics-listen",
            &admin,
            "--enable-fault-injection",
            "--barrier-injection-timeout-ms",
            "300",
        ],
    );
    create_topic(&broker, "read", 2, &[]);
    kcat_write(&broker, "read", 0, &["a"]);
    kcat_write(&broker, "read", 1, &["b"]);
    barrier_ok(
        &broker,
        &["define", "reader", "--topics", "read", "--interval", "1h"],
    );
    for _ in 0..2 {
        assert_eq!(
            barrier_json(&broker, &["trigger", "reader"])["status"],
            "complete"
        );
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "cut-reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("a consumer");
    let mut reader = streams::CutReader::new(consumer, 50)
        .unwrap()
        .with_poll_timeout(Duration::from_secs(30));
    let latest = reader
        .latest_complete_cut("reader")
        .unwrap()
        .expect("a cut");
    let listed = cuts(&broker, "reader");
    assert_eq!(latest.epoch, 2);
    assert_eq!(latest.offsets, listed[&2].1, "the offsets the broker lists");
    // A partial cut (read/0 poisoned) is skipped.
    poison_partition_0(&broker, &admin, "read");
    assert_eq!(
        barrier_json(&broker, &["trigger", "reader"])["status"],
        "partial"
    );
    assert_eq!(
        reader
            .latest_complete_cut("reader")
            .unwrap()
            .map(|c| c.epoch),
        Some(2)
    );
    let after: Vec<i64> = reader
        .complete_cuts_after("reader", 0)
        .unwrap()
        .iter()
        .map(|c| c.epoch)
        .collect();
    assert_eq!(after, vec![1, 2], "never the partial epoch 3");
    // The restart reopens the partition; the next cut is complete and read incrementally.
    broker.restart();
    assert_eq!(
        barrier_json(&broker, &["trigger", "reader"])["status"],
        "complete"
    );
    // Published after the consumer's last fetch: read by this call or the next one.
    let t0 = Instant::now();
    let after = loop {
        let after: Vec<i64> = reader
            .complete_cuts_after("reader", 2)
            .unwrap()
            .iter()
            .map(|c| c.epoch)
            .collect();
        if !after.is_empty() || t0.elapsed() > Duration::from_secs(30) {
            break after;
        }
    };
    assert_eq!(after, vec![4]);
    assert!(reader.latest_complete_cut("nobody").unwrap().is_none());
}

/// Makes `topic`/0 (on core 0) refuse every append until the broker restarts: its next
/// fdatasync fails (the fault injector), which poisons its log.
fn poison_partition_0(broker: &Broker, admin: &str, topic: &str) {
    let armed = http_request(admin, "POST", "/v1/debug/disk-fault?core=0&op=fdatasync");
    assert!(armed.starts_with("HTTP/1.1 200"), "{armed}");
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let records = engine::batch_encode::encode_uncompressed([engine::batch_encode::NewRecord {
        value: Some(Bytes::from_static(b"poison")),
        timestamp_ms: 1,
        ..Default::default()
    }]);
    let r: ProduceResponse = call(
        &mut s,
        0,
        9,
        1,
        &produce_req(topic, 0, Bytes::from(records)),
    );
    assert_eq!(
        r.responses[0].partition_responses[0].error_code,
        KAFKA_STORAGE_ERROR
    );
    http_request(admin, "POST", "/v1/debug/disk-fault?core=0&op=clear");
}

// ---------------------------------------------------------------------------------------------
// KFC-4 as a krabka client speaks it: the five APIs over a raw socket, encoded and decoded by
// this test's own code from krabka's layouts (not by the broker's codec).
// ---------------------------------------------------------------------------------------------

use net::barrier::format as kfc4;

/// A flexible-version body being written: compact strings and arrays, tagged fields.
#[derive(Default)]
struct Body(Vec<u8>);

impl Body {
    fn uvarint(&mut self, mut v: u32) -> &mut Self {
        while v >= 0x80 {
            self.0.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.uvarint(s.len() as u32 + 1);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn len(&mut self, n: usize) -> &mut Self {
        self.uvarint(n as u32 + 1)
    }
    fn i8(&mut self, v: i8) -> &mut Self {
        self.0.push(v as u8);
        self
    }
    fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn tags(&mut self) -> &mut Self {
        self.0.push(0);
        self
    }
}

/// A flexible-version body being read.
struct Read<'a>(&'a [u8]);

impl Read<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        assert!(self.0.len() >= n, "the answer is short");
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn uvarint(&mut self) -> u32 {
        let mut v = 0u32;
        for i in 0..5 {
            let b = self.take(1)[0];
            v |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return v;
            }
        }
        panic!("an overlong varint")
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().unwrap())
    }
    fn i8(&mut self) -> i8 {
        self.take(1)[0] as i8
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }
    fn nullable_str(&mut self) -> Option<String> {
        match self.uvarint() {
            0 => None,
            n => Some(String::from_utf8(self.take(n as usize - 1).to_vec()).unwrap()),
        }
    }
    fn str(&mut self) -> String {
        self.nullable_str().expect("a string, not null")
    }
    fn array<T>(&mut self, mut each: impl FnMut(&mut Self) -> T) -> Vec<T> {
        let n = self.uvarint();
        assert!(n > 0, "an array, not null");
        (0..n - 1).map(|_| each(self)).collect()
    }
    fn tags(&mut self) {
        assert_eq!(self.uvarint(), 0, "no tagged fields");
    }
    fn end(&self) {
        assert!(self.0.is_empty(), "{} trailing bytes", self.0.len());
    }
}

/// Sends one barrier request (header v2, version 0) and returns its answer's body after the
/// response header v1 (checked).
fn kfc4_call(s: &mut TcpStream, api_key: i16, corr: i32, body: &Body) -> Vec<u8> {
    use std::io::Write;
    let mut frame = Vec::new();
    frame.extend_from_slice(&api_key.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&corr.to_be_bytes());
    frame.extend_from_slice(&9i16.to_be_bytes());
    frame.extend_from_slice(b"krabka-go");
    frame.push(0);
    frame.extend_from_slice(&body.0);
    let mut sized = (frame.len() as i32).to_be_bytes().to_vec();
    sized.extend_from_slice(&frame);
    s.write_all(&sized).unwrap();
    let answer = support::wire::read_frame(s, "a barrier API").to_vec();
    let mut r = Read(&answer);
    assert_eq!(r.i32(), corr, "correlation id");
    r.tags();
    r.0.to_vec()
}

/// `topics [topic | partitions [partition | offset | _t] | _t] | missing [topic | partition
/// | _t]`, as (topic, partition) → offset and the missing ones.
type CutRead = (BTreeMap<(String, i32), i64>, Vec<(String, i32)>);

fn read_cut_offsets(r: &mut Read<'_>) -> CutRead {
    let mut offsets = BTreeMap::new();
    r.array(|r| {
        let topic = r.str();
        r.array(|r| {
            let p = r.i32();
            offsets.insert((topic.clone(), p), r.i64());
            r.tags();
        });
        r.tags();
    });
    let missing = r.array(|r| {
        let m = (r.str(), r.i32());
        r.tags();
        m
    });
    (offsets, missing)
}

/// The raw batches of `topic`/`partition` from `offset` (Fetch v12, read_uncommitted).
fn fetch_raw(s: &mut TcpStream, topic: &str, partition: i32, offset: i64) -> Bytes {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = call(s, 1, 12, 77, &req);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch {topic}/{partition}");
    p.records.clone().unwrap_or_default()
}

/// Every record of `__barrier_state`'s partition of `group`: (key, value).
fn barrier_state_records(s: &mut TcpStream, group: &str) -> Vec<(Bytes, Option<Bytes>)> {
    use kafka_protocol::records::RecordBatchDecoder;
    let p = kfc4::coordinator_partition(group) as i32;
    let mut bytes = fetch_raw(s, kfc4::BARRIER_STATE_TOPIC, p, 0);
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let set = RecordBatchDecoder::decode(&mut bytes).expect("a record batch");
        for r in set.records {
            if !r.control {
                out.push((r.key.expect("a key"), r.value));
            }
        }
    }
    out
}

/// The five KFC-4 APIs as krabka's client speaks them, byte for byte: krabka's request
/// layouts are answered, every answer decodes with krabka's response layouts (trailing bytes
/// refused), with krabka's error codes; the markers carry the cut's trigger time and the
/// partition's leader epoch; every `__barrier_state` record decodes with the KFC-4 decoders.
#[test]
fn a_krabka_client_speaks_the_five_barrier_apis() {
    let broker = Broker::start(1);
    create_topic(&broker, "orders", 2, &[]);
    kcat_write(&broker, "orders", 0, &["a", "b"]);
    kcat_write(&broker, "orders", 1, &["c"]);
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();

    // 1010: a group with no periodic injection (interval -1), and refusals: INVALID_CONFIG
    // (40) for an interval of 0 and no retained cut, INVALID_REQUEST (42) for a topic named
    // twice and for no topic, RESOURCE_NOT_FOUND (91) to delete a group that is not there.
    let mut b = Body::default();
    b.len(6);
    let groups: [(&str, &[&str], i64, i32, bool); 6] = [
        ("kfc-cut", &["orders"], -1, 3, false),
        ("bad-interval", &["orders"], 0, 3, false),
        ("bad-retained", &["orders"], 60_000, 0, false),
        ("twice", &["orders", "orders"], 60_000, 3, false),
        ("no-topic", &[], 60_000, 3, false),
        ("ghost", &[], -1, 0, true),
    ];
    for (name, topics, interval, retained, delete) in groups {
        b.str(name).len(topics.len());
        for t in topics {
            b.str(t);
        }
        b.i64(interval).i32(retained).i8(i8::from(delete)).tags();
    }
    b.tags();
    let answer = kfc4_call(&mut s, 1010, 1, &b);
    let mut r = Read(&answer);
    assert_eq!(r.i32(), 0, "throttle_time_ms");
    let results = r.array(|r| {
        let row = (r.str(), r.i16(), r.nullable_str());
        r.tags();
        row
    });
    r.tags();
    r.end();
    let codes: Vec<(&str, i16)> = results.iter().map(|(g, c, _)| (g.as_str(), *c)).collect();
    assert_eq!(
        codes,
        [
            ("kfc-cut", 0),
            ("bad-interval", 40),
            ("bad-retained", 40),
            ("twice", 42),
            ("no-topic", 42),
            ("ghost", 91)
        ],
        "{results:?}"
    );
    assert!(results[0].2.is_none() && results[1..].iter().all(|(_, _, m)| m.is_some()));

    // 1011: no group named is every group this broker coordinates; an unknown one is 91 with
    // krabka's defaults.
    let describe = |s: &mut TcpStream, names: &[&str]| {
        let mut b = Body::default();
        b.len(names.len());
        for n in names {
            b.str(n);
        }
        b.tags();
        let answer = kfc4_call(s, 1011, 2, &b);
        let mut r = Read(&answer);
        assert_eq!(r.i32(), 0, "throttle_time_ms");
        let rows = r.array(|r| {
            let row = (
                r.str(),
                r.i16(),
                r.nullable_str(),
                r.array(|r| r.str()),
                r.i64(),
                r.i32(),
                r.i64(),
                r.i32(),
            );
            r.tags();
            row
        });
        r.tags();
        r.end();
        rows
    };
    let rows = describe(&mut s, &[]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (name, code, message, topics, interval, retained, last_epoch, coordinator) = &rows[0];
    assert_eq!((name.as_str(), *code, message), ("kfc-cut", 0, &None));
    assert_eq!(topics, &["orders".to_string()]);
    assert_eq!(
        (*interval, *retained, *last_epoch),
        (-1, 3, 0),
        "no cut yet: 0"
    );
    assert_eq!(*coordinator, 1, "the node id of its coordinator");
    let rows = describe(&mut s, &["ghost"]);
    assert_eq!(
        (rows[0].1, &rows[0].3, rows[0].4, rows[0].5, rows[0].6, rows[0].7),
        (91, &vec![], -1, 0, -1, -1),
        "{rows:?}"
    );

    // 1012: the answer is the cut, with its marker offsets (records 0..=1 and 0 are there).
    let mut b = Body::default();
    b.str("kfc-cut").i32(30_000).tags();
    let answer = kfc4_call(&mut s, 1012, 3, &b);
    let mut r = Read(&answer);
    assert_eq!(r.i32(), 0, "throttle_time_ms");
    assert_eq!((r.i16(), r.nullable_str()), (0, None));
    assert_eq!((r.i64(), r.i8()), (1, 0), "epoch 1, complete");
    let (offsets, missing) = read_cut_offsets(&mut r);
    r.tags();
    r.end();
    let want = BTreeMap::from([
        (("orders".to_string(), 0), 2),
        (("orders".to_string(), 1), 1),
    ]);
    assert_eq!(offsets, want);
    assert!(missing.is_empty());
    // Refused: epoch -1 and status partial (1), as krabka answers.
    let mut b = Body::default();
    b.str("ghost").i32(0).tags();
    let answer = kfc4_call(&mut s, 1012, 4, &b);
    let mut r = Read(&answer);
    r.i32();
    assert_eq!(r.i16(), 91);
    assert!(r.nullable_str().is_some());
    assert_eq!((r.i64(), r.i8()), (-1, 1));
    let (offsets, missing) = read_cut_offsets(&mut r);
    assert!(offsets.is_empty() && missing.is_empty());
    r.tags();
    r.end();

    // 1013: from epoch 0, every cut (max_results -1), none (0); an unknown group is 91.
    let list = |s: &mut TcpStream, group: &str, max: i32| {
        let mut b = Body::default();
        b.str(group).i64(0).i32(max).tags();
        let answer = kfc4_call(s, 1013, 5, &b);
        let mut r = Read(&answer);
        assert_eq!(r.i32(), 0, "throttle_time_ms");
        let code = r.i16();
        r.nullable_str();
        let cuts = r.array(|r| {
            let (epoch, triggered, completed, status) = (r.i64(), r.i64(), r.i64(), r.i8());
            let (offsets, missing) = read_cut_offsets(r);
            r.tags();
            (epoch, triggered, completed, status, offsets, missing)
        });
        r.tags();
        r.end();
        (code, cuts)
    };
    let (code, cuts) = list(&mut s, "kfc-cut", -1);
    assert_eq!((code, cuts.len()), (0, 1));
    let (epoch, triggered_at, completed_at, status, offsets, _) = &cuts[0];
    assert_eq!((*epoch, *status), (1, 0));
    assert!(completed_at >= triggered_at);
    assert_eq!(offsets, &want);
    assert_eq!(list(&mut s, "kfc-cut", 0), (0, vec![]));
    assert_eq!(list(&mut s, "ghost", -1).0, 91);
    let rows = describe(&mut s, &["kfc-cut"]);
    assert_eq!(rows[0].6, 1, "last_epoch: the published cut");

    // The markers: a control batch at each cut offset, timestamped with the trigger time,
    // the partition's leader epoch (0: not replicated), no producer.
    for ((topic, p), offset) in &want {
        let bytes = fetch_raw(&mut s, topic, *p, *offset);
        let (h, one) = engine::batch::stored_batches(&bytes)
            .next()
            .expect("a batch at the cut offset");
        assert_eq!(h.base_offset, *offset);
        assert!(h.is_control() && !h.is_transactional());
        assert_eq!(
            (h.base_timestamp, h.max_timestamp),
            (*triggered_at, *triggered_at)
        );
        let leader_epoch = i32::from_be_bytes(one[12..16].try_into().unwrap());
        assert_eq!((leader_epoch, h.producer_id, h.producer_epoch), (0, -1, -1));
    }

    // 1014: a marker fenced by its expected leader epoch: 0 is orders/0's, -1 is fenced (74),
    // a partition not here is 6; the answer has no throttle time.
    let mut b = Body::default();
    b.str("external")
        .i64(9)
        .i64(1_724_500_000_000)
        .len(1)
        .str("orders")
        .len(3);
    for (p, expected) in [(0, 0), (1, -1), (7, 0)] {
        b.i32(p).i32(expected).tags();
    }
    b.tags().tags();
    let answer = kfc4_call(&mut s, 1014, 6, &b);
    let mut r = Read(&answer);
    let topics = r.array(|r| {
        let topic = r.str();
        let rows = r.array(|r| {
            let row = (r.i32(), r.i16(), r.i64());
            r.tags();
            row
        });
        r.tags();
        (topic, rows)
    });
    r.tags();
    r.end();
    assert_eq!(topics.len(), 1);
    let rows = &topics[0].1;
    assert_eq!((rows[0].0, rows[0].1), (0, 0));
    assert_eq!(rows[0].2, 3, "after the records and the cut's marker");
    assert_eq!(rows[1..], [(1, 74, -1), (7, 6, -1)]);
    let bytes = fetch_raw(&mut s, "orders", 0, 3);
    let (h, one) = engine::batch::stored_batches(&bytes).next().unwrap();
    assert_eq!((h.base_offset, h.max_timestamp), (3, 1_724_500_000_000));
    let (kind, value) = engine::txn::control_record_of(one).unwrap();
    assert_eq!(kind, kfc4::BARRIER_CONTROL_TYPE);
    assert_eq!(
        kfc4::decode_marker_value(&value.unwrap()).unwrap(),
        kfc4::MarkerValue {
            group: "external".into(),
            epoch: 9,
            triggered_at_ms: 1_724_500_000_000
        }
    );

    // `__barrier_state`: every record decodes with KFC-4's own layouts; the last group record
    // names the published epoch.
    let records = barrier_state_records(&mut s, "kfc-cut");
    let decoded: Vec<kfc4::StateRecord> = records
        .iter()
        .map(|(k, v)| kfc4::decode_record(k, v.as_deref()).expect("a KFC-4 record"))
        .collect();
    let last_group = decoded
        .iter()
        .rev()
        .find_map(|r| match r {
            kfc4::StateRecord::Group { value, .. } => Some(value.clone()),
            _ => None,
        })
        .flatten()
        .expect("a group record");
    assert_eq!(
        last_group,
        kfc4::GroupValue {
            topics: vec!["orders".into()],
            interval_ms: None,
            retained_cuts: 3,
            last_epoch: 1
        }
    );
    assert!(decoded.iter().any(|r| matches!(
        r,
        kfc4::StateRecord::InjectionStart { epoch: 1, value: Some(v), .. }
            if v.targets == [("orders".to_string(), 2)]
    )));
    // The CLI speaks the same APIs.
    let d = barrier_json(&broker, &["describe"]);
    assert_eq!(d[0]["group"], "kfc-cut", "{d}");
    assert_eq!(d[0]["interval_ms"], -1, "{d}");
}

/// A data directory an earlier ringlog build wrote (its group record in that build's own
/// layout) keeps its group and cuts: the fixture holds group `legacy-cut` (topics `orders`,
/// interval 1h, 3 retained cuts) and its cuts 1 (orders/0@2, orders/1@1) and 2 (orders/0@4,
/// orders/1@3), made by `ringlog barrier define` and two `trigger`s on a one-core broker of
/// that build and a clean stop, more than an hour before this test could first run. After the
/// upgrade the group's interval cut is due at once: it is epoch 3; the group is described,
/// its cuts listed and verified, a trigger makes epoch 4, and the group record is rewritten
/// in KFC-4's layout.
#[test]
fn a_data_directory_of_an_earlier_build_keeps_its_barrier_groups_and_cuts() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/barrier-state-before-kfc4.tgz");
    let mut tar = Command::new("tar");
    tar.arg("xzf").arg(&fixture).arg("-C").arg(dir.path());
    run_ok(tar, None, Duration::from_secs(60));
    let broker = Broker::start_on_data_dir(1, &dir.path().join("data"), &[]);
    // The interval cut the upgraded coordinator owes (its last cut is over an hour old).
    let t0 = Instant::now();
    while last_epoch(&broker, "legacy-cut") < 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no interval cut after the upgrade"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let d = barrier_json(&broker, &["describe", "legacy-cut"]);
    assert_eq!(d[0]["topics"], serde_json::json!(["orders"]), "{d}");
    assert_eq!(d[0]["interval_ms"], 3_600_000, "{d}");
    assert_eq!(d[0]["retained_cuts"], 3, "{d}");
    assert_eq!(d[0]["last_epoch"], 3, "{d}");
    let before = cuts(&broker, "legacy-cut");
    let o = |t: &str, p: i32| (t.to_string(), p);
    assert_eq!(before.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(
        before[&1].1,
        BTreeMap::from([(o("orders", 0), 2), (o("orders", 1), 1)])
    );
    assert_eq!(
        before[&2].1,
        BTreeMap::from([(o("orders", 0), 4), (o("orders", 1), 3)])
    );
    assert_eq!(
        before[&3].1,
        BTreeMap::from([(o("orders", 0), 5), (o("orders", 1), 4)])
    );
    let out = barrier_ok(&broker, &["verify", "legacy-cut"]);
    assert!(out.contains("6 marker(s), 0 mismatch(es)"), "{out}");
    let t = barrier_json(&broker, &["trigger", "legacy-cut"]);
    assert_eq!(
        (t["epoch"].as_i64(), t["status"].as_str()),
        (Some(4), Some("complete"))
    );
    // The group record now reads in KFC-4's layout (the old one is still in the log, read
    // by the broker's migrating decoder).
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let records = barrier_state_records(&mut s, "legacy-cut");
    let layouts: Vec<kfc4::legacy::Layout> = records
        .iter()
        .map(|(k, v)| {
            kfc4::legacy::decode_record(k, v.as_deref())
                .expect("a record")
                .1
        })
        .collect();
    assert!(
        layouts.contains(&kfc4::legacy::Layout::Legacy),
        "the fixture's own records"
    );
    let (k, v) = records
        .iter()
        .rev()
        .find(|(k, _)| kfc4::decode_key(k).is_ok_and(|k| k.kind == kfc4::RecordKind::Group))
        .expect("a group record");
    assert_eq!(
        kfc4::decode_record(k, v.as_deref()).expect("KFC-4's layout"),
        kfc4::StateRecord::Group {
            group: "legacy-cut".into(),
            value: Some(kfc4::GroupValue {
                topics: vec!["orders".into()],
                interval_ms: Some(3_600_000),
                retained_cuts: 3,
                last_epoch: 4,
            }),
        }
    );
}
