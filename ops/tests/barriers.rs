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
    let started = barrier_json(&broker, &["trigger", "part", "--no-wait"]);
    assert_eq!(started["status"], "injecting", "{started}");
    let epoch = started["epoch"].as_i64().unwrap();
    // One injection of a group at a time: refused while refuse/0's marker is retried.
    let (code, _, err) = barrier(&broker, &["trigger", "part"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("BARRIER_INJECTION_IN_PROGRESS (1000)"),
        "{err}"
    );
    let t0 = Instant::now();
    let mut all = cuts(&broker, "part");
    while !all.contains_key(&epoch) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "epoch {epoch} not published: {all:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
        all = cuts(&broker, "part");
    }
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
    let describe = barrier_json(&broker, &["describe", "part"]);
    assert_eq!(
        describe[0]["latest_epoch"].as_i64(),
        Some(epoch),
        "{describe}"
    );
    assert_eq!(
        describe[0]["latest_complete_epoch"].as_i64(),
        Some(epoch - 1),
        "{describe}"
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
        let t = barrier_json(&broker, &["trigger", "kill", "--no-wait"]);
        let epoch = t["epoch"].as_i64().expect("an epoch");
        let delay = if held {
            rng.range(0, 2500)
        } else {
            rng.range(0, 20)
        };
        std::thread::sleep(Duration::from_millis(delay));
        broker.kill();
        broker.restart();
        // Finished after the restart: describe shows no injection and the epoch published.
        let t0 = Instant::now();
        loop {
            let d = barrier_json(&broker, &["describe", "kill"]);
            if d[0]["injecting_epoch"].as_i64() == Some(-1)
                && d[0]["latest_epoch"].as_i64() == Some(epoch)
            {
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
    assert!(err.contains("GROUP_ID_NOT_FOUND"), "{err}");
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
    use net::barrier::wire::{self, BarrierRequest, BarrierResponse, DescribeBarrierGroupsRequest};
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
        &BarrierRequest::Describe(DescribeBarrierGroupsRequest { groups: None }),
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
