//! Topic configs that act on the log, seen from real clients (issue #4): small `segment.bytes`
//! rolls segments, `retention.bytes` deletes whole old segments (log start offset moves up), and
//! what is left reads back unchanged from the new log start.
//!
//! The broker's retention check interval comes from a `--config` file (kebab-case TOML keys).

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

const TOPIC: &str = "ret";
const MESSAGES: usize = 3_000;

fn watermarks(broker: &Broker) -> (i64, i64) {
    let out = run_python(
        "admin.py",
        &["watermarks", &broker.bootstrap(), TOPIC, "0"],
        &[],
        Duration::from_secs(30),
    );
    let mut it = out.split_whitespace().map(|s| s.parse::<i64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

fn log_files(broker: &Broker) -> Vec<String> {
    let dir = broker.data_dir().join("topics").join(TOPIC).join("p00000");
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    v.sort();
    v
}

#[test]
fn retention_bytes_deletes_old_segments() {
    let cfg = tempfile::tempdir().unwrap();
    let cfg_path = cfg.path().join("ringlog.toml");
    std::fs::write(&cfg_path, "log-retention-check-interval-ms = 200\n").unwrap();
    let mut broker = Broker::start_with(1, &["--config", cfg_path.to_str().unwrap()]);
    create_topic(
        &broker,
        TOPIC,
        1,
        &[("segment.bytes", "16384"), ("retention.bytes", "40000")],
    );

    // ~100-byte values, one small batch per kcat line group: plenty of 16 KiB segments.
    let value = |i: usize| format!("{i:06}-{}", "r".repeat(93));
    let input: String = (0..MESSAGES).map(|i| value(i) + "\n").collect();
    let mut c = Command::new(kcat());
    c.args(["-b", &broker.bootstrap(), "-P", "-t", TOPIC, "-p", "0"])
        .args(["-X", "linger.ms=1", "-X", "batch.num.messages=20"]);
    run_ok(c, Some(input.as_bytes()), Duration::from_secs(60));

    // Retention runs every 200 ms, also while kcat was still writing: wait until two samples
    // more than a retention pass apart agree (a pass after the last write has run and the
    // next one finds nothing to delete), 30 s at most.
    let t0 = Instant::now();
    let sample = |b: &Broker| (watermarks(b), log_files(b));
    let mut last = sample(&broker);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = sample(&broker);
        let settled = now == last && (now.0).0 > 0 && now.1.len() <= 5;
        last = now;
        if settled || t0.elapsed() > Duration::from_secs(30) {
            break;
        }
    }
    let ((lo, hi), _) = last;
    assert_eq!(hi, MESSAGES as i64, "high watermark");
    assert!(
        lo > 0,
        "retention.bytes=40000 with segment.bytes=16384 and ~300 kB written: log start offset \
         still 0 after 30 s; segments: {:?}",
        log_files(&broker)
    );
    let files = log_files(&broker);
    assert!(
        files.len() <= 5,
        "retention left {} segments (want about 40000/16384 + active): {files:?}",
        files.len()
    );
    assert_eq!(
        files.first().map(String::as_str),
        Some(format!("{lo:020}.log").as_str()),
        "the oldest segment's base offset should be the log start offset {lo}"
    );

    // Everything from the log start reads back in order.
    let mut c = Command::new(kcat());
    c.args([
        "-b",
        &broker.bootstrap(),
        "-C",
        "-e",
        "-t",
        TOPIC,
        "-p",
        "0",
    ])
    .args(["-o", &lo.to_string(), "-f", "%o %s\n"]);
    let out = run_ok(c, None, Duration::from_secs(60));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len() as i64, hi - lo, "read from the log start");
    for (k, line) in lines.iter().enumerate() {
        let o = lo as usize + k;
        assert_eq!(*line, format!("{o} {}", value(o)), "record at offset {o}");
    }
    broker.terminate();
}

/// `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms` through the Kafka
/// protocol: a produced batch whose CreateTime lies further from the broker's clock than the
/// topic allows is refused whole with INVALID_TIMESTAMP, naming the records that failed; a
/// current one is stored; a LogAppendTime topic takes any.
#[test]
fn produced_timestamps_outside_the_topic_window_are_refused() {
    use bytes::Bytes;
    use engine::batch_encode::{encode_uncompressed, NewRecord};
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ProduceResponse,
    };
    use kafka_protocol::protocol::StrBytes;
    use std::net::TcpStream;
    use support::wire::{call, produce_req};

    const INVALID_TIMESTAMP: i16 = 32;
    const HOUR_MS: i64 = 3_600_000;
    let topic = "stamps";
    let mut broker = Broker::start(1);
    create_topic(
        &broker,
        topic,
        1,
        &[("message.timestamp.before.max.ms", "600000")],
    );
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let batch = |stamps: &[i64]| {
        Bytes::from(encode_uncompressed(stamps.iter().map(|&ts| NewRecord {
            value: Some(Bytes::from_static(b"v")),
            timestamp_ms: ts,
            ..Default::default()
        })))
    };
    let mut corr = 0;
    let mut produce = |s: &mut TcpStream, records: Bytes| {
        corr += 1;
        let r: ProduceResponse = call(s, 0, 9, corr, &produce_req(topic, 0, records));
        r.responses[0].partition_responses[0].clone()
    };

    // An hour old (the topic allows ten minutes), beside a current record: the whole batch
    // is refused and the old record named.
    let t = now();
    let p = produce(&mut s, batch(&[t, t - HOUR_MS]));
    assert_eq!(p.error_code, INVALID_TIMESTAMP, "{p:?}");
    assert_eq!(p.record_errors.len(), 1, "{p:?}");
    assert_eq!(p.record_errors[0].batch_index, 1);
    let why = p.record_errors[0]
        .batch_index_error_message
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default();
    assert!(
        why.starts_with(&format!(
            "Timestamp {} of message with offset 1 is out of range",
            t - HOUR_MS
        )),
        "{why}"
    );
    // Two hours ahead: past Kafka's default message.timestamp.after.max.ms (an hour).
    let p = produce(&mut s, batch(&[now() + 2 * HOUR_MS]));
    assert_eq!(p.error_code, INVALID_TIMESTAMP, "{p:?}");
    // Current records, and ones without a timestamp (-1), are stored; nothing refused was.
    let p = produce(&mut s, batch(&[now(), now() - 60_000, -1]));
    assert_eq!((p.error_code, p.base_offset), (0, 0), "{p:?}");

    // On a LogAppendTime topic the broker stamps the batch: any CreateTime goes.
    let set = |name: &str, value: &str| {
        AlterableConfig::default()
            .with_name(StrBytes::from_string(name.into()))
            .with_config_operation(0)
            .with_value(Some(StrBytes::from_string(value.into())))
    };
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.into()))
            .with_configs(vec![set("message.timestamp.type", "LogAppendTime")]),
    ]);
    let r: IncrementalAlterConfigsResponse = call(&mut s, 44, 1, 100, &alter);
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let p = produce(&mut s, batch(&[now() - 10 * HOUR_MS]));
        if p.error_code == 0 {
            assert_eq!(p.base_offset, 3);
            break;
        }
        assert_eq!(p.error_code, INVALID_TIMESTAMP, "{p:?}");
        assert!(
            Instant::now() < deadline,
            "the altered config never took effect"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    broker.assert_alive();
    broker.terminate();
}
