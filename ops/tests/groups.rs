//! Consumer groups with real clients (issue #5): rebalances under member loss with range and
//! cooperative-sticky, kcat -G and kafka-python commits visible everywhere, offsets surviving a
//! broker restart, and refused commits from unknown members and old generations.

mod support;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DeleteTopicsRequest, GroupId, HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, RequestHeader, ResponseHeader, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use support::*;

/// A background client process, killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_python(script: &str, args: &[&str]) -> Proc {
    let mut cmd = python_cmd(script, args);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    Proc(cmd.spawn().expect("spawn python client"))
}

/// A broker whose new groups rebalance after 300 ms instead of Kafka's 3 s.
fn group_broker(cores: usize) -> Broker {
    let cfg = std::env::temp_dir().join(format!("ringlog-groups-{}.toml", std::process::id()));
    std::fs::write(&cfg, "group-initial-rebalance-delay-ms = 300\n").unwrap();
    Broker::start_with(cores, &["--config", cfg.to_str().unwrap()])
}

fn consumed_ids(files: &[std::path::PathBuf]) -> BTreeSet<u64> {
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<u64>>()
        })
        .collect()
}

fn rebalance_scenario(strategy: &str) {
    let broker = group_broker(2);
    let topic = "orders";
    create_topic(&broker, topic, 6, &[]);
    let bs = broker.bootstrap();
    let group = format!("g-{strategy}");
    let dir = broker.temp_dir().to_path_buf();
    let outs: Vec<_> = (0..3)
        .map(|i| dir.join(format!("consumer-{i}.txt")))
        .collect();
    let mut consumers: Vec<Proc> = outs
        .iter()
        .map(|o| {
            spawn_python(
                "group_consumer.py",
                &[&bs, &group, topic, strategy, o.to_str().unwrap()],
            )
        })
        .collect();
    const N: u64 = 12_000;
    let mut producer = python_cmd(
        "group_producer.py",
        &[&bs, topic, "0", &N.to_string(), "1500"],
    );
    producer.stdout(Stdio::piped()).stderr(Stdio::piped());
    let producer = producer.spawn().expect("producer");
    // Let the group form and consume, then close one consumer cleanly and SIGKILL another.
    std::thread::sleep(Duration::from_secs(3));
    let closed = consumers.remove(0);
    // SAFETY: signalling a child we own.
    unsafe { libc::kill(closed.0.id() as i32, libc::SIGTERM) };
    std::thread::sleep(Duration::from_secs(2));
    let killed = consumers.remove(0);
    drop(killed); // SIGKILL: its session must time out
    drop(closed);
    let out = producer.wait_with_output().expect("producer runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "producer failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("DONE {N}")),
        "every message acknowledged: {text}"
    );
    // The surviving consumer takes over every partition and catches up.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut got = consumed_ids(&outs);
    while (got.len() as u64) < N && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        got = consumed_ids(&outs);
    }
    let missing: Vec<u64> = (0..N).filter(|i| !got.contains(i)).take(10).collect();
    assert!(
        missing.is_empty(),
        "{strategy}: {} of {N} consumed; first missing ids {missing:?}; broker log tail:\n{}",
        got.len(),
        tail(&broker.stderr_text(), 3000)
    );
    drop(consumers);
}

#[test]
fn confluent_group_survives_close_and_sigkill_range() {
    rebalance_scenario("range");
}

#[test]
fn confluent_group_survives_close_and_sigkill_cooperative_sticky() {
    rebalance_scenario("cooperative-sticky");
}

fn describe_group(broker: &Broker, group: &str) -> serde_json::Value {
    serde_json::from_str(&ringlog(&[
        "group",
        "describe",
        group,
        "--brokers",
        &broker.bootstrap(),
        "--json",
    ]))
    .unwrap()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn static_member_restart_within_session_timeout_causes_no_rebalance() {
    let broker = group_broker(2);
    create_topic(&broker, "st", 4, &[]);
    let bs = broker.bootstrap();
    let dir = broker.temp_dir().to_path_buf();
    let out = |n: &str| dir.join(format!("{n}.txt")).to_str().unwrap().to_string();
    let (oa, ob) = (out("a"), out("b"));
    let _a = spawn_python(
        "group_consumer.py",
        &[&bs, "static-group", "st", "range", &oa, "instance-a"],
    );
    // The first member's own rebalance completes before the second starts (instance-a is the
    // leader; a restarting leader would rebalance, as in Kafka).
    wait_for("the first member, stable", || {
        let d = describe_group(&broker, "static-group");
        d["state"] == "Stable" && d["members"].as_array().is_some_and(|m| m.len() == 1)
    });
    let b = spawn_python(
        "group_consumer.py",
        &[&bs, "static-group", "st", "range", &ob, "instance-b"],
    );
    wait_for("a stable group of two", || {
        let d = describe_group(&broker, "static-group");
        d["state"] == "Stable" && d["members"].as_array().is_some_and(|m| m.len() == 2)
    });
    let rebalances = || {
        broker
            .stderr_text()
            .matches("rebalance: join complete")
            .count()
    };
    let before = rebalances();
    assert!(before >= 2, "the group formed through rebalances");
    drop(b); // SIGKILL instance-b, then restart it well within its 6 s session timeout
    let _b2 = spawn_python(
        "group_consumer.py",
        &[&bs, "static-group", "st", "range", &ob, "instance-b"],
    );
    wait_for("instance-b back", || {
        let d = describe_group(&broker, "static-group");
        d["state"] == "Stable"
            && d["members"].as_array().is_some_and(|m| {
                m.len() == 2
                    && m.iter()
                        .filter(|x| x["instance_id"] == "instance-b")
                        .count()
                        == 1
            })
    });
    // Longer than a session timeout: the old instance-b session must not expire into a rebalance.
    std::thread::sleep(Duration::from_secs(8));
    let d = describe_group(&broker, "static-group");
    assert_eq!(d["state"], "Stable", "{d}");
    assert_eq!(
        rebalances(),
        before,
        "the static member's restart caused no rebalance:\n{}",
        tail(&broker.stderr_text(), 3000)
    );
}

fn ringlog(args: &[&str]) -> String {
    let mut cmd = Command::new(ringlog_bin());
    cmd.args(args);
    run_ok(cmd, None, Duration::from_secs(30))
}

fn committed(
    client: &str,
    broker: &Broker,
    group: &str,
    topic: &str,
    partitions: u32,
) -> serde_json::Value {
    let out = run_python(
        "group_offsets.py",
        &[
            client,
            &broker.bootstrap(),
            group,
            topic,
            &partitions.to_string(),
        ],
        &[],
        Duration::from_secs(60),
    );
    serde_json::from_str(out.trim()).expect("offsets JSON")
}

#[test]
fn kcat_and_kafka_python_commits_are_visible_everywhere_and_survive_restart() {
    let mut broker = group_broker(2);
    let topic = "events";
    create_topic(&broker, topic, 3, &[]);
    let bs = broker.bootstrap();
    let input: String = (0..300).map(|i| format!("k{}:v{i}\n", i % 7)).collect();
    let mut p = Command::new(kcat());
    p.args(["-b", &bs, "-P", "-t", topic, "-K:"]);
    run_ok(p, Some(input.as_bytes()), Duration::from_secs(60));

    // kcat as a balanced consumer: reads everything, commits, exits at the end.
    let mut c = Command::new(kcat());
    c.args([
        "-b",
        &bs,
        "-G",
        "kcat-group",
        topic,
        "-o",
        "beginning",
        "-e",
        "-f",
        "%s\n",
        "-X",
        "auto.commit.interval.ms=100",
    ]);
    let out = run_ok(c, None, Duration::from_secs(90));
    assert_eq!(out.lines().count(), 300, "kcat -G consumed everything");
    let conf = committed("confluent", &broker, "kcat-group", topic, 3);
    let kp = committed("kafka-python", &broker, "kcat-group", topic, 3);
    assert_eq!(conf, kp, "both clients see the same committed offsets");
    let total: i64 = (0..3).map(|p| conf[p.to_string()].as_i64().unwrap()).sum();
    assert_eq!(
        total, 300,
        "kcat committed the end of every partition: {conf}"
    );

    // kafka-python as a group consumer of another group; confluent sees its commits.
    let n = run_python(
        "kafka_python_group.py",
        &[&bs, "kp-group", topic, "300"],
        &[],
        Duration::from_secs(90),
    );
    assert_eq!(n.trim(), "300");
    let conf2 = committed("confluent", &broker, "kp-group", topic, 3);
    assert_eq!(conf2, conf, "kafka-python committed the same ends");

    // The CLI shows both groups and their offsets.
    let list = ringlog(&["group", "list", "--brokers", &bs, "--json"]);
    assert!(
        list.contains("kcat-group") && list.contains("kp-group"),
        "{list}"
    );
    let describe: serde_json::Value = serde_json::from_str(&ringlog(&[
        "group",
        "describe",
        "kcat-group",
        "--brokers",
        &bs,
        "--json",
    ]))
    .unwrap();
    let lags: Vec<i64> = describe["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["lag"].as_i64().unwrap())
        .collect();
    assert_eq!(
        lags,
        vec![0, 0, 0],
        "no lag after consuming everything: {describe}"
    );

    // Restart: offsets unchanged; a consumer of the group resumes after them.
    broker.terminate();
    broker.restart();
    assert_eq!(
        committed("confluent", &broker, "kcat-group", topic, 3),
        conf,
        "offsets survive restart"
    );
    let more: String = (300..350).map(|i| format!("k{}:v{i}\n", i % 7)).collect();
    let mut p = Command::new(kcat());
    p.args(["-b", &bs, "-P", "-t", topic, "-K:"]);
    run_ok(p, Some(more.as_bytes()), Duration::from_secs(60));
    let mut c = Command::new(kcat());
    c.args(["-b", &bs, "-G", "kcat-group", topic, "-e", "-f", "%s\n"]);
    let out = run_ok(c, None, Duration::from_secs(90));
    let values: Vec<&str> = out.lines().collect();
    assert_eq!(
        values.len(),
        50,
        "resumed from the committed offsets, not the beginning: {out}"
    );
    assert!(values.iter().all(|v| v[1..].parse::<u32>().unwrap() >= 300));

    // Reset to the earliest offsets while the group is empty.
    let reset = ringlog(&[
        "group",
        "reset-offsets",
        "kcat-group",
        "--topic",
        topic,
        "--to-earliest",
        "--brokers",
        &bs,
        "--json",
    ]);
    assert!(reset.contains("\"new_offset\": 0"), "{reset}");
    let after = committed("kafka-python", &broker, "kcat-group", topic, 3);
    assert!((0..3).all(|p| after[p.to_string()] == 0), "{after}");
}

// ---- raw protocol checks -------------------------------------------------------------------

struct Raw {
    s: TcpStream,
    corr: i32,
}

impl Raw {
    fn call<R: Request>(&mut self, req: &R, version: i16) -> R::Response {
        self.corr += 1;
        let h = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.corr)
            .with_client_id(Some(StrBytes::from_static_str("raw")));
        let mut b = BytesMut::new();
        b.extend_from_slice(&[0; 4]);
        h.encode(&mut b, R::header_version(version)).unwrap();
        req.encode(&mut b, version).unwrap();
        let n = (b.len() - 4) as i32;
        b[..4].copy_from_slice(&n.to_be_bytes());
        self.s.write_all(&b).unwrap();
        let mut sz = [0u8; 4];
        self.s.read_exact(&mut sz).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(sz) as usize];
        self.s.read_exact(&mut body).unwrap();
        let mut body = Bytes::from(body);
        ResponseHeader::decode(&mut body, R::Response::header_version(version)).unwrap();
        R::Response::decode(&mut body, version).unwrap()
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

#[test]
fn commits_from_unknown_members_and_old_generations_are_refused() {
    let broker = group_broker(2);
    create_topic(&broker, "t", 1, &[]);
    let mut raw = Raw {
        s: TcpStream::connect(broker.addr()).unwrap(),
        corr: 0,
    };
    raw.s
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let join = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(s("raw-group")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(s(member))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"m"))])
    };
    let first = raw.call(&join(""), 5);
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED on the first join");
    let member = first.member_id.to_string();
    let joined = raw.call(&join(&member), 5);
    assert_eq!(joined.error_code, 0);
    let generation = joined.generation_id;
    assert_eq!(joined.leader.to_string(), member);
    let sync = raw.call(
        &SyncGroupRequest::default()
            .with_group_id(GroupId(s("raw-group")))
            .with_generation_id(generation)
            .with_member_id(s(&member))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(s(&member))
                .with_assignment(Bytes::from_static(b"a"))]),
        3,
    );
    assert_eq!((sync.error_code, &sync.assignment[..]), (0, &b"a"[..]));
    let commit = |member: &str, generation: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("raw-group")))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(s(member))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(5)])])
    };
    let code =
        |r: kafka_protocol::messages::OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    assert_eq!(
        code(raw.call(&commit("nobody", generation), 5)),
        25,
        "UNKNOWN_MEMBER_ID"
    );
    assert_eq!(
        code(raw.call(&commit(&member, generation - 1), 5)),
        22,
        "ILLEGAL_GENERATION"
    );
    assert_eq!(
        code(raw.call(&commit("", -1), 5)),
        25,
        "a standalone commit while the group has members"
    );
    assert_eq!(code(raw.call(&commit(&member, generation), 5)), 0);
    let hb = |member: &str, generation: i32| {
        HeartbeatRequest::default()
            .with_group_id(GroupId(s("raw-group")))
            .with_generation_id(generation)
            .with_member_id(s(member))
    };
    assert_eq!(raw.call(&hb("nobody", generation), 3).error_code, 25);
    assert_eq!(raw.call(&hb(&member, generation + 7), 3).error_code, 22);
    assert_eq!(raw.call(&hb(&member, generation), 3).error_code, 0);

    // Offsets of a deleted topic go away.
    let fetch = |raw: &mut Raw| {
        let r = raw.call(
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(s("raw-group")))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0])])),
            5,
        );
        r.topics[0].partitions[0].committed_offset
    };
    assert_eq!(fetch(&mut raw), 5, "committed");
    let del = raw.call(
        &DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(s("t"))])
            .with_timeout_ms(30_000),
        4,
    );
    assert_eq!(del.responses[0].error_code, 0);
    assert_eq!(
        fetch(&mut raw),
        -1,
        "a deleted topic's offsets are forgotten"
    );
}
