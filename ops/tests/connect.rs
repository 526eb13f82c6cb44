//! A Kafka Connect distributed worker (Apache Kafka's connect-runtime, the genuine Java
//! code) against `ringlog serve`: a FileStreamSource connector copies a file into a topic, a
//! FileStreamSink connector copies the topic into another file; the worker is SIGKILLed and
//! restarted and must resume from its committed offsets. Again with exactly-once source
//! support (KIP-618: transactions and `fenceProducers`). Also, at the wire level, the two APIs
//! Connect needed that ringlog lacked: OffsetDelete (KIP-875's offset reset of a sink
//! connector) and DescribeCluster (the cluster id lookup at start).
//!
//! The jars: `support/java.rs`.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DescribeClusterRequest, DescribeClusterResponse, GroupId, JoinGroupRequest, JoinGroupResponse,
    ListTransactionsRequest, ListTransactionsResponse, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use support::java::{connect_classpath, connect_log4j, spawn_connect_jvm};
use support::peer::KafkaPeer;
use support::wire::call;
use support::*;

// ---------------------------------------------------------------------------------------------
// The worker
// ---------------------------------------------------------------------------------------------

/// A `ConnectDistributed` JVM; SIGKILLed on drop.
struct Worker {
    child: Option<Child>,
    properties: PathBuf,
    log4j: PathBuf,
    log: PathBuf,
    rest: String,
}

impl Worker {
    /// `extra`: more worker properties, one `key=value` per line.
    fn new(dir: &Path, bootstrap: &str, extra: &str) -> Worker {
        let port = free_port();
        let rest = format!("127.0.0.1:{port}");
        let properties = dir.join("worker.properties");
        // Short sessions so that the restarted worker and its sink consumer are not kept out
        // of their groups for long by the killed worker's members (Kafka's defaults are 10 s
        // and 45 s); Kafka's own minimum, group.min.session.timeout.ms, is 6 s.
        let config = format!(
            "bootstrap.servers={bootstrap}
group.id=ringlog-connect
config.storage.topic=connect-configs
offset.storage.topic=connect-offsets
status.storage.topic=connect-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=false
value.converter.schemas.enable=false
offset.flush.interval.ms=500
listeners=http://{rest}
rest.advertised.host.name=127.0.0.1
rest.advertised.port={port}
plugin.discovery=service_load
session.timeout.ms=6000
heartbeat.interval.ms=1000
consumer.session.timeout.ms=6000
consumer.heartbeat.interval.ms=1000
{extra}
"
        );
        fs::write(&properties, config).unwrap();
        let log4j = connect_log4j(dir);
        Worker {
            child: None,
            properties,
            log4j,
            log: dir.join("worker.log"),
            rest,
        }
    }

    fn start(&mut self) {
        assert!(self.child.is_none());
        let child = spawn_connect_jvm(
            "org.apache.kafka.connect.cli.ConnectDistributed",
            &self.properties,
            &self.log4j,
            &self.log,
        );
        self.child = Some(child);
    }

    /// SIGKILL (a crash) and reap.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid, not yet reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }

    fn log_tail(&self) -> String {
        let text = String::from_utf8_lossy(&fs::read(&self.log).unwrap_or_default()).into_owned();
        tail(&text, 12_000).to_string()
    }

    fn assert_alive(&mut self) {
        if let Some(st) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
            self.child = None;
            panic!(
                "the Connect worker exited ({st})\n--- worker log ---\n{}",
                self.log_tail()
            );
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- Connect worker log (tail) ---\n{}", self.log_tail());
        }
    }
}

/// One HTTP/1.0 exchange (the server closes after it; no chunked bodies): (status, body).
fn http(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Polls `probe` every 200 ms until it returns `Ok`, at most `limit`; on time-out panics with
/// `what`, the last observation, and both processes' log tails.
fn wait_for<T>(
    what: &str,
    limit: Duration,
    worker: &mut Worker,
    broker: &mut dyn BrokerUnderTest,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let t0 = Instant::now();
    loop {
        let last = match probe() {
            Ok(v) => return v,
            Err(why) => why,
        };
        worker.assert_alive();
        broker.assert_alive();
        if t0.elapsed() > limit {
            panic!(
                "timed out after {limit:?} waiting for {what}; last: {last}\n\
                 --- worker log (tail) ---\n{}\n--- {} log (tail) ---\n{}",
                worker.log_tail(),
                broker.kind(),
                broker.log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn read_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn line(i: usize) -> String {
    format!("line-{i:06}")
}

fn append_lines(path: &Path, range: std::ops::Range<usize>) {
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    let text: String = range.map(|i| line(i) + "\n").collect();
    f.write_all(text.as_bytes()).unwrap();
    f.sync_all().unwrap();
}

/// Creates the connector (retrying while the herder is still joining its group) and waits
/// until it and its task run.
fn create_connector(
    worker: &mut Worker,
    broker: &mut dyn BrokerUnderTest,
    name: &str,
    config: serde_json::Value,
) {
    let rest = worker.rest.clone();
    let body = serde_json::json!({ "name": name, "config": config }).to_string();
    wait_for(
        &format!("POST /connectors {name}"),
        Duration::from_secs(40),
        worker,
        broker,
        || match http(&rest, "POST", "/connectors", Some(&body)) {
            Ok((201, _)) => Ok(()),
            Ok((409, b)) if b.contains("already exists") => Ok(()),
            Ok((code, b)) => Err(format!("{code} {b}")),
            Err(e) => Err(e.to_string()),
        },
    );
    wait_until_running(worker, broker, name);
}

fn wait_until_running(worker: &mut Worker, broker: &mut dyn BrokerUnderTest, name: &str) {
    let rest = worker.rest.clone();
    let path = format!("/connectors/{name}/status");
    wait_for(
        &format!("{name} and its task RUNNING"),
        Duration::from_secs(40),
        worker,
        broker,
        || {
            let (code, b) = http(&rest, "GET", &path, None).map_err(|e| e.to_string())?;
            let v: serde_json::Value =
                serde_json::from_str(&b).map_err(|e| format!("{code} {b}: {e}"))?;
            let running = v["connector"]["state"] == "RUNNING"
                && v["tasks"]
                    .as_array()
                    .is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["state"] == "RUNNING"));
            if running {
                Ok(())
            } else {
                Err(b)
            }
        },
    );
}

/// The source connector's committed position in the file (GET /connectors/src/offsets).
fn committed_source_position(rest: &str) -> Result<u64, String> {
    let (code, b) =
        http(rest, "GET", "/connectors/src/offsets", None).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&b).map_err(|e| format!("{code} {b}: {e}"))?;
    v["offsets"][0]["offset"]["position"]
        .as_u64()
        .ok_or(format!("{code} {b}"))
}

/// The sink connector's committed offset of `lines/0` (GET /connectors/sink/offsets: the
/// consumer group's offset, read from the broker with an admin client).
fn committed_sink_offset(rest: &str) -> Result<u64, String> {
    let (code, b) =
        http(rest, "GET", "/connectors/sink/offsets", None).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&b).map_err(|e| format!("{code} {b}: {e}"))?;
    v["offsets"][0]["offset"]["kafka_offset"]
        .as_u64()
        .ok_or(format!("{code} {b}"))
}

/// The values of every record of partition 0 of `topic`, through `ringlog consume` (a Kafka
/// client: it reads the Kafka peer too).
fn topic_values(bootstrap: &str, topic: &str) -> Vec<String> {
    let mut cmd = Command::new(ringlog_bin());
    cmd.args([
        "consume",
        topic,
        "--from-beginning",
        "--exit-at-end",
        "--brokers",
    ])
    .arg(bootstrap);
    run_ok(cmd, None, Duration::from_secs(30))
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn connect_file_source_and_sink_survive_a_worker_crash() {
    let mut broker = Broker::start(2);
    file_source_and_sink_survive_a_worker_crash(&mut broker, "", |_| {});
    broker.assert_alive();
    broker.terminate();
}

/// The same scenario, unchanged, against the Kafka 4.4 peer: what the test asserts of ringlog
/// is what Kafka does.
#[test]
fn connect_file_source_and_sink_survive_a_worker_crash_on_kafka() {
    let Some(mut peer) = KafkaPeer::start(&[]) else {
        return;
    };
    file_source_and_sink_survive_a_worker_crash(&mut peer, "", |_| {});
}

/// The same with exactly-once source support (KIP-618): the worker fences its source tasks'
/// transactional producers (`Admin.fenceProducers`) and the source writes its records and
/// offsets in transactions; the topic again holds each line once.
#[test]
fn connect_exactly_once_source_survives_a_worker_crash() {
    let mut broker = Broker::start(2);
    file_source_and_sink_survive_a_worker_crash(
        &mut broker,
        "exactly.once.source.support=enabled",
        |bootstrap| {
            // The source task's transactional id is known to the coordinator: it wrote in
            // transactions.
            let mut c = TcpStream::connect(bootstrap).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let r: ListTransactionsResponse =
                call(&mut c, 66, 0, 1, &ListTransactionsRequest::default());
            assert!(
                !r.transaction_states.is_empty(),
                "no transactional id after an exactly-once source ran: {r:?}"
            );
        },
    );
    broker.assert_alive();
    broker.terminate();
}

/// Runs the source → topic → sink scenario against `broker` with `extra` worker properties
/// (one `key=value` per line); `also` checks the broker (by its bootstrap) at the end.
fn file_source_and_sink_survive_a_worker_crash(
    broker: &mut dyn BrokerUnderTest,
    extra: &str,
    also: impl FnOnce(&str),
) {
    const N: usize = 2000;
    const M: usize = 500;
    let classpath_ready = Instant::now();
    connect_classpath();
    eprintln!("connect jars ready in {:?}", classpath_ready.elapsed());
    let t0 = Instant::now();
    let dir = tempfile::Builder::new()
        .prefix("ringlog-connect-")
        .tempdir()
        .unwrap();
    let source = dir.path().join("source.txt");
    let sink = dir.path().join("sink.txt");
    File::create(&source).unwrap();
    let mut worker = Worker::new(dir.path(), &broker.bootstrap(), extra);
    worker.start();
    let rest = worker.rest.clone();
    // The REST server answers before the herder has joined its group; the connector creation
    // below retries until the herder takes it.
    wait_for(
        "the worker's REST server",
        Duration::from_secs(60),
        &mut worker,
        broker,
        || match http(&rest, "GET", "/", None) {
            Ok((200, b)) if b.contains("kafka_cluster_id") => Ok(b),
            Ok((code, b)) => Err(format!("{code} {b}")),
            Err(e) => Err(e.to_string()),
        },
    );
    eprintln!("worker up after {:?}", t0.elapsed());
    // The source creates its topic through the worker's admin client (KIP-158).
    create_connector(
        &mut worker,
        broker,
        "src",
        serde_json::json!({
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1",
            "file": source.display().to_string(),
            "topic": "lines",
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "1",
        }),
    );
    create_connector(
        &mut worker,
        broker,
        "sink",
        serde_json::json!({
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "file": sink.display().to_string(),
            "topics": "lines",
        }),
    );

    // 1. N lines through source → topic → sink, in order.
    append_lines(&source, 1..N + 1);
    let expected: Vec<String> = (1..N + 1).map(line).collect();
    wait_for(
        &format!("{N} lines in the sink file"),
        Duration::from_secs(60),
        &mut worker,
        broker,
        || {
            let got = read_lines(&sink);
            if got.len() >= N {
                Ok(())
            } else {
                Err(format!("{} lines", got.len()))
            }
        },
    );
    assert_eq!(
        read_lines(&sink),
        expected,
        "the sink file, before the crash"
    );
    eprintln!("{N} lines through after {:?}", t0.elapsed());
    // Connect created its internal topics compacted (and checked that with DescribeConfigs).
    for topic in ["connect-configs", "connect-offsets", "connect-status"] {
        let out = Command::new(ringlog_bin())
            .args([
                "topic",
                "describe",
                "--json",
                "--brokers",
                &broker.bootstrap(),
                topic,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let policy = j["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "cleanup.policy")
            .map(|c| c["value"].clone());
        assert_eq!(policy, Some(serde_json::json!("compact")), "{topic}: {j}");
    }
    // Both committed offsets (flushed every 500 ms) cover everything: the source's position in
    // the file, in the offsets topic, and the sink consumer group's offset, on the broker.
    // Restarted from them, neither may hand over any of it again.
    let file_len = fs::metadata(&source).unwrap().len();
    wait_for(
        "the committed offsets covering everything",
        Duration::from_secs(20),
        &mut worker,
        broker,
        || {
            let p = committed_source_position(&rest)?;
            let o = committed_sink_offset(&rest)?;
            if p == file_len && o == N as u64 {
                Ok(())
            } else {
                Err(format!(
                    "source at {p} of {file_len} bytes, sink at {o} of {N}"
                ))
            }
        },
    );

    // 2. A crash, more lines while the worker is down, a restart with the same config.
    worker.kill();
    append_lines(&source, N + 1..N + M + 1);
    let restarted = Instant::now();
    worker.start();
    let all: HashSet<String> = (1..N + M + 1).map(line).collect();
    wait_for(
        &format!("all {} lines in the sink file after the restart", N + M),
        Duration::from_secs(60),
        &mut worker,
        broker,
        || {
            let got: HashSet<String> = read_lines(&sink).into_iter().collect();
            let missing = all.difference(&got).count();
            if missing == 0 {
                Ok(())
            } else {
                Err(format!("{missing} missing"))
            }
        },
    );
    eprintln!(
        "after the restart, all {} lines in the sink {:?} later",
        N + M,
        restarted.elapsed()
    );
    wait_until_running(&mut worker, broker, "src");
    wait_until_running(&mut worker, broker, "sink");
    let got = read_lines(&sink);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &got {
        *counts.entry(l.as_str()).or_default() += 1;
    }
    let strangers: Vec<&&str> = counts.keys().filter(|l| !all.contains(**l)).collect();
    assert!(strangers.is_empty(), "lines nobody wrote: {strangers:?}");
    assert_eq!(counts.len(), N + M, "every line present");
    let duplicates = got.len() - counts.len();
    eprintln!(
        "sink file: {} lines, {} distinct, {duplicates} duplicates",
        got.len(),
        counts.len()
    );
    // At-least-once allows duplicates after a crash, but none can come from before the
    // committed offsets, and those covered everything written before the kill.
    assert_eq!(
        got[..N],
        expected[..],
        "the sink file keeps what it had before the crash"
    );
    assert_eq!(
        duplicates, 0,
        "the restarted sink resumed at its committed offset {N}"
    );
    // The topic holds each line once: the restarted source resumed at its committed position.
    let values = topic_values(&broker.bootstrap(), "lines");
    let want: Vec<String> = (1..N + M + 1).map(|i| format!("\"{}\"", line(i))).collect();
    assert_eq!(
        values, want,
        "topic 'lines' (JSON strings): each line once, in order"
    );
    // The worker's consumers fetch in incremental sessions: a broker answering a session's
    // fetch with partitions it did not ask for makes the Java client log so (and drop it).
    let log = String::from_utf8_lossy(&fs::read(&worker.log).unwrap_or_default()).into_owned();
    let invalid: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sent an invalid") && l.contains("fetch response"))
        .collect();
    assert!(
        invalid.is_empty(),
        "{}: the Java client found fetch responses that break its session:\n{}",
        broker.kind(),
        invalid.join("\n")
    );
    worker.kill();
    also(&broker.bootstrap());
    broker.assert_alive();
    eprintln!("connect test done in {:?}", t0.elapsed());
}

// ---------------------------------------------------------------------------------------------
// The APIs Connect needed, on the wire
// ---------------------------------------------------------------------------------------------

const API_OFFSET_COMMIT: i16 = 8;
const API_OFFSET_FETCH: i16 = 9;
const API_JOIN_GROUP: i16 = 11;
const API_SYNC_GROUP: i16 = 14;
const API_METADATA: i16 = 3;
const API_OFFSET_DELETE: i16 = 47;
const API_DESCRIBE_CLUSTER: i16 = 60;

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn connect(broker: &Broker) -> TcpStream {
    let c = TcpStream::connect(broker.addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c
}

/// A broker whose new groups complete their first rebalance at once.
fn broker_without_rebalance_delay(cores: usize) -> (Broker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ringlog.toml");
    fs::write(&config, "group-initial-rebalance-delay-ms = 0\n").unwrap();
    let b = Broker::start_with(cores, &["--config", config.to_str().unwrap()]);
    (b, dir)
}

fn commit(
    c: &mut TcpStream,
    group: &str,
    member: &str,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (t, p, o) in offsets {
        let part = OffsetCommitRequestPartition::default()
            .with_partition_index(*p)
            .with_committed_offset(*o);
        match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
            Some(x) => x.partitions.push(part),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(t)))
                    .with_partitions(vec![part]),
            ),
        }
    }
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(topics);
    let r: OffsetCommitResponse = call(c, API_OFFSET_COMMIT, 8, 1, &req);
    for t in &r.topics {
        for p in &t.partitions {
            assert_eq!(
                p.error_code, 0,
                "commit {group} {}/{}",
                t.name.0, p.partition_index
            );
        }
    }
}

/// Committed offsets of `group` for `(topic, partition)`s: -1 where none.
fn fetch(c: &mut TcpStream, group: &str, wanted: &[(&str, i32)]) -> Vec<i64> {
    let topics = wanted
        .iter()
        .map(|(t, p)| {
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(s(t)))
                .with_partition_indexes(vec![*p])
        })
        .collect();
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(topics));
    let r: OffsetFetchResponse = call(c, API_OFFSET_FETCH, 7, 2, &req);
    assert_eq!(r.error_code, 0);
    wanted
        .iter()
        .map(|(t, p)| {
            r.topics
                .iter()
                .filter(|x| x.name.0.as_str() == *t)
                .flat_map(|x| x.partitions.iter())
                .find(|y| y.partition_index == *p)
                .map_or(-1, |y| y.committed_offset)
        })
        .collect()
}

fn offset_delete(c: &mut TcpStream, group: &str, asked: &[(&str, &[i32])]) -> OffsetDeleteResponse {
    let req = OffsetDeleteRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            asked
                .iter()
                .map(|(t, ps)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(
                            ps.iter()
                                .map(|p| {
                                    OffsetDeleteRequestPartition::default().with_partition_index(*p)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    call(c, API_OFFSET_DELETE, 0, 3, &req)
}

/// Per (topic, partition) of the response, its error code.
fn codes_of(r: &OffsetDeleteResponse) -> Vec<(String, i32, i16)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect()
}

/// A `ConsumerProtocolSubscription` v0 of `topics` (no user data).
fn subscription(topics: &[&str]) -> bytes::Bytes {
    let mut b = 0i16.to_be_bytes().to_vec();
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    bytes::Bytes::from(b)
}

/// One member joins `group` (JoinGroup v3: no MEMBER_ID_REQUIRED round) and syncs; the group
/// is then Stable with it. Returns (member id, generation).
fn join_alone(
    c: &mut TcpStream,
    group: &str,
    protocol_type: &str,
    metadata: bytes::Bytes,
) -> (String, i32) {
    let req = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(s(protocol_type))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(metadata)]);
    let j: JoinGroupResponse = call(c, API_JOIN_GROUP, 3, 4, &req);
    assert_eq!(j.error_code, 0, "join {group}");
    let member = j.member_id.to_string();
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(j.generation_id)
        .with_member_id(s(&member))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(&member))
            .with_assignment(bytes::Bytes::new())]);
    let r: SyncGroupResponse = call(c, API_SYNC_GROUP, 3, 5, &sync);
    assert_eq!(r.error_code, 0, "sync {group}");
    (member, j.generation_id)
}

#[test]
fn offset_delete_forgets_offsets_as_kafka_does() {
    const NONE: i16 = 0;
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    const INVALID_GROUP_ID: i16 = 24;
    const NON_EMPTY_GROUP: i16 = 68;
    const GROUP_ID_NOT_FOUND: i16 = 69;
    const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    let (mut broker, _config_dir) = broker_without_rebalance_delay(2);
    create_topic(&broker, "t", 2, &[]);
    create_topic(&broker, "u", 1, &[]);
    let mut c = connect(&broker);

    // Group errors answer the whole request, with no topics.
    let r = offset_delete(&mut c, "", &[("t", &[0])]);
    assert_eq!((r.error_code, r.topics.len()), (INVALID_GROUP_ID, 0));
    let r = offset_delete(&mut c, "nobody", &[("t", &[0])]);
    assert_eq!((r.error_code, r.topics.len()), (GROUP_ID_NOT_FOUND, 0));

    // A simple (memberless) group: committed offsets go, unknown topics and partitions are
    // refused per partition, a partition without an offset is nothing to do.
    commit(
        &mut c,
        "simple",
        "",
        -1,
        &[("t", 0, 10), ("t", 1, 11), ("u", 0, 12)],
    );
    let r = offset_delete(
        &mut c,
        "simple",
        &[("t", &[0, 5]), ("missing", &[0]), ("u", &[0, 0])],
    );
    assert_eq!(r.error_code, NONE);
    assert_eq!(
        codes_of(&r),
        vec![
            ("t".to_string(), 0, NONE),
            ("t".to_string(), 5, UNKNOWN_TOPIC_OR_PARTITION),
            ("missing".to_string(), 0, UNKNOWN_TOPIC_OR_PARTITION),
            ("u".to_string(), 0, NONE),
            ("u".to_string(), 0, NONE),
        ]
    );
    assert_eq!(
        fetch(&mut c, "simple", &[("t", 0), ("t", 1), ("u", 0)]),
        vec![-1, 11, -1]
    );
    let r = offset_delete(&mut c, "simple", &[("u", &[0])]);
    assert_eq!(
        codes_of(&r),
        vec![("u".to_string(), 0, NONE)],
        "again: nothing to do"
    );

    // A live consumer group subscribed to t: t's offsets stay, u's go.
    let (member, generation) = join_alone(&mut c, "live", "consumer", subscription(&["t"]));
    commit(
        &mut c,
        "live",
        &member,
        generation,
        &[("t", 0, 5), ("u", 0, 6)],
    );
    let r = offset_delete(&mut c, "live", &[("t", &[0, 1]), ("u", &[0])]);
    assert_eq!(r.error_code, NONE);
    assert_eq!(
        codes_of(&r),
        vec![
            ("t".to_string(), 0, GROUP_SUBSCRIBED_TO_TOPIC),
            ("t".to_string(), 1, GROUP_SUBSCRIBED_TO_TOPIC),
            ("u".to_string(), 0, NONE),
        ]
    );
    assert_eq!(fetch(&mut c, "live", &[("t", 0), ("u", 0)]), vec![5, -1]);

    // A live group of another protocol (a Connect cluster's) is not touched at all.
    let (member, generation) = join_alone(
        &mut c,
        "workers",
        "connect",
        bytes::Bytes::from_static(b"x"),
    );
    commit(&mut c, "workers", &member, generation, &[("u", 0, 7)]);
    let r = offset_delete(&mut c, "workers", &[("u", &[0])]);
    assert_eq!((r.error_code, r.topics.len()), (NON_EMPTY_GROUP, 0));
    assert_eq!(fetch(&mut c, "workers", &[("u", 0)]), vec![7]);

    // The deletions are durable: a restart replays the tombstones.
    drop(c);
    broker.terminate();
    broker.restart();
    let mut c = connect(&broker);
    assert_eq!(
        fetch(&mut c, "simple", &[("t", 0), ("t", 1), ("u", 0)]),
        vec![-1, 11, -1]
    );
    assert_eq!(fetch(&mut c, "live", &[("t", 0), ("u", 0)]), vec![5, -1]);
    broker.assert_alive();
}

/// The first commit of a memberless group (a simple consumer's, or an admin client's: Connect
/// alters a stopped sink connector's offsets so) is kept, however the group tick falls during
/// its append: the group, vacant until the offset is in memory, used to be dropped meanwhile
/// and the acknowledged offset with it (until a restart replayed it).
#[test]
fn first_commits_of_new_simple_groups_are_kept() {
    let broker = Broker::start(1);
    create_topic(&broker, "t", 1, &[]);
    let mut c = connect(&broker);
    for i in 0..300 {
        let group = format!("simple-{i}");
        commit(&mut c, &group, "", -1, &[("t", 0, i)]);
        assert_eq!(fetch(&mut c, &group, &[("t", 0)]), vec![i], "{group}");
    }
}

/// CreateTopics v5+ answers the new topic's configs (KIP-525), as Connect's internal topics are
/// created: `cleanup.policy=compact` from the request, the rest the broker's defaults.
#[test]
fn create_topics_answers_the_new_topics_configs() {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    const API_CREATE_TOPICS: i16 = 19;
    let broker = Broker::start(1);
    let mut c = connect(&broker);
    let req = |name: &str, validate_only: bool| {
        CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_validate_only(validate_only)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s(name)))
                .with_num_partitions(3)
                .with_replication_factor(1)
                .with_configs(vec![CreatableTopicConfig::default()
                    .with_name(s("cleanup.policy"))
                    .with_value(Some(s("compact")))])])
    };
    for (corr, (name, validate_only)) in [("dry", true), ("connect-offsets", false)]
        .into_iter()
        .enumerate()
    {
        let r: CreateTopicsResponse = call(
            &mut c,
            API_CREATE_TOPICS,
            7,
            corr as i32,
            &req(name, validate_only),
        );
        let t = &r.topics[0];
        assert_eq!(t.error_code, 0, "{name}: {:?}", t.error_message);
        assert_eq!((t.num_partitions, t.replication_factor), (3, 1));
        let configs = t.configs.as_ref().expect("configs");
        let get = |k: &str| {
            configs
                .iter()
                .find(|c| c.name.as_str() == k)
                .map(|c| (c.value.as_ref().map(|v| v.to_string()), c.config_source))
        };
        assert_eq!(
            get("cleanup.policy"),
            Some((Some("compact".into()), 1)),
            "{name}: the topic's own"
        );
        assert_eq!(
            get("retention.ms"),
            Some((Some("604800000".into()), 5)),
            "{name}: the default"
        );
        assert!(configs.iter().all(|c| !c.read_only && !c.is_sensitive));
    }
    // A refused create carries no configs.
    let r: CreateTopicsResponse = call(
        &mut c,
        API_CREATE_TOPICS,
        7,
        9,
        &req("connect-offsets", false),
    );
    assert_eq!(r.topics[0].error_code, 36, "TOPIC_ALREADY_EXISTS");
    assert!(r.topics[0].configs.as_ref().is_none_or(|c| c.is_empty()));
}

#[test]
fn describe_cluster_names_this_broker_as_kafka_does() {
    const MISMATCHED_ENDPOINT_TYPE: i16 = 114;
    const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
    let mut broker = Broker::start(1);
    let mut c = connect(&broker);
    let meta: MetadataResponse = call(&mut c, API_METADATA, 12, 1, &MetadataRequest::default());
    let node = meta.brokers[0].node_id;
    for v in 0..=2 {
        let r: DescribeClusterResponse = call(
            &mut c,
            API_DESCRIBE_CLUSTER,
            v,
            2,
            &DescribeClusterRequest::default(),
        );
        assert_eq!(r.error_code, 0, "v{v}");
        assert_eq!(Some(&r.cluster_id), meta.cluster_id.as_ref(), "v{v}");
        assert_eq!(r.controller_id, node);
        assert_eq!(r.brokers.len(), 1);
        let b = &r.brokers[0];
        assert_eq!((b.broker_id, b.port), (node, broker.addr().port() as i32));
        assert_eq!(b.host.as_str(), "127.0.0.1");
        assert!(!b.is_fenced);
        assert_eq!(r.cluster_authorized_operations, i32::MIN, "not asked for");
        if v >= 1 {
            assert_eq!(r.endpoint_type, 1, "brokers");
        }
    }
    // No authorizer: every operation the cluster resource has (KIP-430 bit field).
    let r: DescribeClusterResponse = call(
        &mut c,
        API_DESCRIBE_CLUSTER,
        2,
        3,
        &DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
    );
    let ops: Vec<u32> = (0..32)
        .filter(|b| r.cluster_authorized_operations & (1 << b) != 0)
        .collect();
    assert_eq!(ops, vec![5, 7, 8, 9, 10, 11, 12], "CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE");
    // Controllers are not served here; an unknown endpoint type is refused.
    let ask = |c: &mut TcpStream, v: i16, t: i8| -> DescribeClusterResponse {
        call(
            c,
            API_DESCRIBE_CLUSTER,
            v,
            4,
            &DescribeClusterRequest::default().with_endpoint_type(t),
        )
    };
    let r = ask(&mut c, 1, 2);
    assert_eq!(r.error_code, MISMATCHED_ENDPOINT_TYPE);
    assert!(r.brokers.is_empty() && r.cluster_id.is_empty());
    assert!(r
        .error_message
        .as_ref()
        .is_some_and(|m| m.contains("CONTROLLER")));
    let r = ask(&mut c, 2, 9);
    assert_eq!(r.error_code, UNSUPPORTED_ENDPOINT_TYPE);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Unsupported endpoint type 9")
    );
    // (v0 carries no endpoint type, so it always asks for brokers.)
    broker.assert_alive();
}
