//! Disk faults at broker level (issue #23), with real files: the data dir on a small
//! loop-mounted ext4 filesystem. When the disk fills, produce gets KAFKA_STORAGE_ERROR with a
//! message, nothing acknowledged is lost, reads go on, and produce resumes once space is freed,
//! without a restart. Needs root (mount); CI runs as root.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::net::TcpStream;
use support::wire::{call, produce_req};
use support::*;

const KAFKA_STORAGE_ERROR: i16 = 56;
/// Size of the test filesystem.
const FS_BYTES: u64 = 96 << 20;

/// A loop-mounted ext4 filesystem, unmounted and removed on drop.
struct SmallFs {
    mount: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallFs {
    fn new() -> SmallFs {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("fs.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(FS_BYTES)
            .unwrap();
        let ok = |mut c: Command, what: &str| {
            let out = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                out.status.success(),
                "{what} failed (this test needs root and loop devices): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let mut mkfs = Command::new("mkfs.ext4");
        mkfs.args(["-q", "-F", "-m", "0"]).arg(&image);
        ok(mkfs, "mkfs.ext4");
        let mount = dir.path().join("mnt");
        std::fs::create_dir_all(&mount).unwrap();
        let mut m = Command::new("mount");
        m.args(["-o", "loop"]).arg(&image).arg(&mount);
        ok(m, "mount -o loop");
        SmallFs { mount, _dir: dir }
    }

    /// Fills the filesystem with a file until the disk refuses more; returns its path.
    fn fill(&self) -> PathBuf {
        let path = self.mount.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![0x55u8; 1 << 20];
        loop {
            match f.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let _ = f.sync_all();
        path
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

/// One acks=all produce of a batch of `n` records of `size` bytes; (error code, message,
/// base offset).
fn produce(s: &mut TcpStream, corr: i32, tag: u64, n: usize, size: usize) -> (i16, String, i64) {
    produce_to(s, "full", 0, corr, tag, n, size)
}

fn produce_to(
    s: &mut TcpStream,
    topic: &str,
    partition: i32,
    corr: i32,
    tag: u64,
    n: usize,
    size: usize,
) -> (i16, String, i64) {
    let records = engine::batch_encode::encode_uncompressed((0..n).map(|i| {
        engine::batch_encode::NewRecord {
            key: Some(Bytes::from(format!("{tag}-{i}"))),
            value: Some(Bytes::from(vec![b'd'; size])),
            timestamp_ms: 1_700_000_000_000,
            ..Default::default()
        }
    }));
    let req = produce_req(topic, partition, Bytes::from(records));
    let r: ProduceResponse = call(s, 0, 9, corr, &req);
    let p = &r.responses[0].partition_responses[0];
    (
        p.error_code,
        p.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
        p.base_offset,
    )
}

/// Offsets of every record readable from partition 0 of `full`.
fn read_all(s: &mut TcpStream, corr: &mut i32) -> Vec<i64> {
    read_partition(s, "full", 0, corr)
}

/// Offsets of every record readable from a partition.
fn read_partition(s: &mut TcpStream, topic: &str, partition: i32, corr: &mut i32) -> Vec<i64> {
    let mut offsets = Vec::new();
    let mut next = 0i64;
    loop {
        let req = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(8 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(next)
                    .with_partition_max_bytes(8 << 20)])]);
        *corr += 1;
        let r: FetchResponse = call(s, 1, 11, *corr, &req);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch at {next}: {p:?}");
        let mut bytes = p.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            return offsets;
        }
        let batches = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
        for b in batches.records {
            offsets.push(b.offset);
            next = b.offset + 1;
        }
    }
}

/// CreateTopics v5 for one topic: (error code, message).
fn create_raw(s: &mut TcpStream, corr: i32, topic: &str) -> (i16, String) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let r: CreateTopicsResponse = call(s, 19, 5, corr, &req);
    let t = &r.topics[0];
    (
        t.error_code,
        t.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

fn config_file(dir: &Path) -> PathBuf {
    let p = dir.join("small-segments.toml");
    std::fs::write(&p, "log-segment-bytes = 8388608\n").unwrap();
    p
}

#[test]
fn a_full_disk_refuses_produce_keeps_acknowledged_data_and_recovers_when_freed() {
    let fs = SmallFs::new();
    let cfg = config_file(fs.mount.parent().unwrap());
    let data = fs.mount.join("data");
    let mut broker = Broker::start_on_data_dir(1, &data, &["--config", cfg.to_str().unwrap()]);
    create_topic(&broker, "full", 1, &[("segment.bytes", "8388608")]);
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut acked: Vec<i64> = Vec::new();
    let mut corr = 0;
    // Some data first, then the disk is filled by another file.
    for tag in 0..20u64 {
        corr += 1;
        let (code, msg, base) = produce(&mut s, corr, tag, 10, 1_000);
        assert_eq!(code, 0, "{msg}");
        acked.extend(base..base + 10);
    }
    let filler = fs.fill();
    // Produce until the disk refuses (the segment's reserved space runs out first).
    let mut refused = None;
    for tag in 20..20_000u64 {
        corr += 1;
        let (code, msg, base) = produce(&mut s, corr, tag, 10, 1_000);
        if code == 0 {
            acked.extend(base..base + 10);
            continue;
        }
        refused = Some((code, msg));
        break;
    }
    let (code, msg) = refused.expect("the full disk refused a produce");
    assert_eq!(code, KAFKA_STORAGE_ERROR, "{msg}");
    assert!(msg.contains("space"), "the refusal names the cause: {msg}");
    broker.assert_alive();
    // Reads go on and hold every acknowledged record.
    assert_eq!(
        read_all(&mut s, &mut corr),
        acked,
        "acknowledged records after ENOSPC"
    );
    // A second attempt is refused the same way (not poisoned into another error).
    corr += 1;
    let (code, _, _) = produce(&mut s, corr, 99_999, 10, 1_000);
    assert_eq!(code, KAFKA_STORAGE_ERROR);
    // The metastore refuses writes with a Kafka code and a message (it stays alive).
    corr += 1;
    let (code, msg) = create_raw(&mut s, corr, "while-full");
    assert_eq!(
        code, KAFKA_STORAGE_ERROR,
        "CreateTopics on a full disk: {msg}"
    );
    assert!(msg.contains("free"), "{msg}");
    // Free the space: produce and metadata writes resume without a restart.
    std::fs::remove_file(&filler).unwrap();
    corr += 1;
    let (code, msg) = create_raw(&mut s, corr, "after-free");
    assert_eq!(code, 0, "CreateTopics after freeing space: {msg}");
    let mut resumed = false;
    for tag in 100_000..100_050u64 {
        corr += 1;
        let (code, msg, base) = produce(&mut s, corr, tag, 10, 1_000);
        if code == 0 {
            acked.extend(base..base + 10);
            resumed = true;
        } else {
            panic!("produce after freeing space: {code} {msg}");
        }
    }
    assert!(resumed);
    assert_eq!(
        read_all(&mut s, &mut corr),
        acked,
        "every acknowledged record"
    );
    // And after a restart, too.
    broker.kill_and_restart_at_once();
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(
        read_all(&mut s, &mut corr),
        acked,
        "every acknowledged record after a crash"
    );
    drop(broker);
}

fn post(admin: &str, path: &str) -> String {
    http_request(admin, "POST", path)
}

/// EIO on fdatasync (the engine's fault injector, armed at broker level on one core): that
/// core's partition is poisoned and answers KAFKA_STORAGE_ERROR, even after the fault is gone
/// (a failed fsync is never retried); the partition on the other core keeps working; every
/// acknowledged record of both stays readable.
#[test]
fn eio_on_fdatasync_poisons_only_that_partition() {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut broker =
        Broker::start_with(2, &["--metrics-listen", &admin, "--enable-fault-injection"]);
    // Placement: __consumer_offsets holds one partition per core, so p0 lands on core 0 and
    // p1 on core 1.
    create_topic(&broker, "eio", 2, &[]);
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut acked = [Vec::new(), Vec::new()];
    let mut corr = 0;
    for tag in 0..5u64 {
        for p in 0..2 {
            corr += 1;
            let (code, msg, base) = produce_to(&mut s, "eio", p, corr, tag, 5, 100);
            assert_eq!(code, 0, "{msg}");
            acked[p as usize].extend(base..base + 5);
        }
    }
    let armed = post(&admin, "/v1/debug/disk-fault?core=0&op=fdatasync");
    assert!(armed.starts_with("HTTP/1.1 200"), "{armed}");
    corr += 1;
    let (code, msg, _) = produce_to(&mut s, "eio", 0, corr, 100, 5, 100);
    assert_eq!(code, KAFKA_STORAGE_ERROR, "{msg}");
    assert!(
        msg.contains("poisoned") || msg.contains("fdatasync"),
        "{msg}"
    );
    let cleared = post(&admin, "/v1/debug/disk-fault?core=0&op=clear");
    assert!(cleared.starts_with("HTTP/1.1 200"), "{cleared}");
    corr += 1;
    let (code, msg, _) = produce_to(&mut s, "eio", 0, corr, 101, 5, 100);
    assert_eq!(
        code, KAFKA_STORAGE_ERROR,
        "a poisoned partition stays refused: {msg}"
    );
    for tag in 200..205u64 {
        corr += 1;
        let (code, msg, base) = produce_to(&mut s, "eio", 1, corr, tag, 5, 100);
        assert_eq!(code, 0, "the other core's partition keeps working: {msg}");
        acked[1].extend(base..base + 5);
    }
    broker.assert_alive();
    assert_eq!(read_partition(&mut s, "eio", 0, &mut corr), acked[0]);
    assert_eq!(read_partition(&mut s, "eio", 1, &mut corr), acked[1]);
    // A restart reopens the poisoned partition from disk: everything acknowledged is there and
    // produce works again.
    broker.kill_and_restart_at_once();
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let got = read_partition(&mut s, "eio", 0, &mut corr);
    assert!(
        got.starts_with(&acked[0]),
        "acknowledged records of the poisoned partition"
    );
    corr += 1;
    let (code, msg, _) = produce_to(&mut s, "eio", 0, corr, 300, 5, 100);
    assert_eq!(code, 0, "after a restart: {msg}");
}
