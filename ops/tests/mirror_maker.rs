//! MirrorMaker 2 (Apache Kafka's `connect-mirror`, the genuine Java code, in its dedicated
//! mode) replicating both ways between the Kafka 4.4 peer and a ringlog node: a topic of each
//! side arrives on the other under the source's prefix (`kafka.from-kafka` on ringlog,
//! `ringlog.from-ringlog` on Kafka) with every record, key, value, header and offset, and a
//! consumer group's committed offset is translated to the copy (`sync.group.offsets.enabled`)
//! through the checkpoints MirrorMaker keeps on each target: exactly for a group that has read
//! everything, and never past where it stopped for one in the middle.
//!
//! Maven Central has no `connect-mirror` of Kafka 4.4.0, so MirrorMaker 2 is the newest there,
//! 4.3.1, on 4.3.1's own Connect runtime and clients (it does not run on 4.4.0's clients,
//! which moved classes it uses): `scripts/kafka-peer.sh classpath connect`. The two
//! brokers it copies between are the Kafka 4.4.0 peer and ringlog, as everywhere else.

mod support;

use std::fs;
use std::path::Path;
use std::time::Instant;

use support::java::{connect_log4j, spawn_connect_jvm, JavaCheck};
use support::peer::KafkaPeer;
use support::*;

/// Records written on each side.
const RECORDS: &str = "1000";
/// The offset each side's group commits before the mirror starts.
const KAFKA_GROUP_OFFSET: u64 = 600;
const RINGLOG_GROUP_OFFSET: u64 = 400;
/// How long the mirror may take to copy a topic, and to translate a group's offset (it
/// refreshes its topic and group lists every 2 s, checkpoints every 1 s).
const MIRROR_WAIT_SECS: &str = "120";

/// The MirrorMaker process; SIGKILLed on drop, its log printed when the test fails.
struct Mirror {
    child: ChildGuard,
    log: std::path::PathBuf,
}

impl Mirror {
    fn start(dir: &Path, kafka: &str, ringlog: &str) -> Mirror {
        let properties = dir.join("mm2.properties");
        fs::write(
            &properties,
            format!(
                "clusters = kafka, ringlog
kafka.bootstrap.servers = {kafka}
ringlog.bootstrap.servers = {ringlog}
kafka->ringlog.enabled = true
kafka->ringlog.topics = from-kafka
kafka->ringlog.groups = g-kafka.*
ringlog->kafka.enabled = true
ringlog->kafka.topics = from-ringlog
ringlog->kafka.groups = g-ringlog.*
tasks.max = 1
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
config.storage.replication.factor = 1
sync.group.offsets.enabled = true
sync.group.offsets.interval.seconds = 1
emit.checkpoints.interval.seconds = 1
emit.heartbeats.interval.seconds = 1
refresh.topics.interval.seconds = 2
refresh.groups.interval.seconds = 2
offset.lag.max = 0
"
            ),
        )
        .unwrap();
        let log4j = connect_log4j(dir);
        let log = dir.join("mirror.log");
        let child = spawn_connect_jvm(
            "org.apache.kafka.connect.mirror.MirrorMaker",
            &properties,
            &log4j,
            &log,
        );
        Mirror {
            child: ChildGuard(child),
            log,
        }
    }

    fn assert_alive(&mut self) {
        if let Some(st) = self.child.0.try_wait().unwrap() {
            panic!("MirrorMaker exited ({st})\n{}", self.log_tail());
        }
    }

    fn log_tail(&self) -> String {
        let text = String::from_utf8_lossy(&fs::read(&self.log).unwrap_or_default()).into_owned();
        tail(&text, 12_000).to_string()
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- MirrorMaker log (tail) ---\n{}", self.log_tail());
        }
    }
}

/// The offset `step` printed ("OK offset=N").
fn offset_of(ok: &str) -> u64 {
    ok.strip_prefix("OK offset=")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not an offset: {ok}"))
}

#[test]
fn mirror_maker_2_replicates_both_ways_with_translated_group_offsets() {
    let Some(mut peer) = KafkaPeer::start(&[]) else {
        return;
    };
    let mut broker = Broker::start(2);
    let check = JavaCheck::compile("MirrorCheck");
    let (kafka, ringlog) = (peer.bootstrap(), broker.bootstrap());
    let t0 = Instant::now();

    // Each side: a topic of its own and a group that has read part of it (and is gone).
    check.run(&["produce", &kafka, "from-kafka", RECORDS, "kafka"]);
    check.run(&["produce", &ringlog, "from-ringlog", RECORDS, "ringlog"]);
    let kafka_offset = KAFKA_GROUP_OFFSET.to_string();
    let ringlog_offset = RINGLOG_GROUP_OFFSET.to_string();
    check.run(&["commit", &kafka, "g-kafka", "from-kafka", &kafka_offset]);
    check.run(&[
        "commit",
        &ringlog,
        "g-ringlog",
        "from-ringlog",
        &ringlog_offset,
    ]);
    // And a group that has read everything.
    check.run(&["commit", &kafka, "g-kafka-done", "from-kafka", RECORDS]);
    check.run(&[
        "commit",
        &ringlog,
        "g-ringlog-done",
        "from-ringlog",
        RECORDS,
    ]);

    let dir = tempfile::tempdir().unwrap();
    let mut mirror = Mirror::start(dir.path(), &kafka, &ringlog);

    // Kafka → ringlog, and ringlog → Kafka: every record, at its offset.
    let copied_to_ringlog = check.run(&[
        "records",
        &ringlog,
        "kafka.from-kafka",
        RECORDS,
        "kafka",
        MIRROR_WAIT_SECS,
    ]);
    mirror.assert_alive();
    let copied_to_kafka = check.run(&[
        "records",
        &kafka,
        "ringlog.from-ringlog",
        RECORDS,
        "ringlog",
        MIRROR_WAIT_SECS,
    ]);
    mirror.assert_alive();
    eprintln!(
        "copied: ringlog {copied_to_ringlog}, kafka {copied_to_kafka} ({:?})",
        t0.elapsed()
    );

    // The groups' offsets, translated onto the copies. A group that has read everything
    // lands exactly at the copy's end. One in the middle may round down to an offset sync
    // MirrorMaker kept (it keeps fewer the further back they lie, and which offsets get a sync
    // depends on how its reads were batched): never up, so that a consumer that moves over
    // resumes no later than where it stopped.
    for (bootstrap, group, topic) in [
        (&ringlog, "g-kafka-done", "kafka.from-kafka"),
        (&kafka, "g-ringlog-done", "ringlog.from-ringlog"),
    ] {
        check.run(&["offset", bootstrap, group, topic, MIRROR_WAIT_SECS, RECORDS]);
    }
    let on_ringlog = offset_of(&check.run(&[
        "offset",
        &ringlog,
        "g-kafka",
        "kafka.from-kafka",
        MIRROR_WAIT_SECS,
    ]));
    let on_kafka = offset_of(&check.run(&[
        "offset",
        &kafka,
        "g-ringlog",
        "ringlog.from-ringlog",
        MIRROR_WAIT_SECS,
    ]));
    eprintln!(
        "translated group offsets: g-kafka {KAFKA_GROUP_OFFSET} -> {on_ringlog} on ringlog, \
         g-ringlog {RINGLOG_GROUP_OFFSET} -> {on_kafka} on kafka ({:?})",
        t0.elapsed()
    );
    assert!(
        on_ringlog > 0 && on_ringlog <= KAFKA_GROUP_OFFSET,
        "g-kafka's offset {KAFKA_GROUP_OFFSET} became {on_ringlog} on ringlog"
    );
    assert!(
        on_kafka > 0 && on_kafka <= RINGLOG_GROUP_OFFSET,
        "g-ringlog's offset {RINGLOG_GROUP_OFFSET} became {on_kafka} on kafka"
    );
    mirror.assert_alive();
    broker.assert_alive();
    peer.assert_alive();
    drop(mirror);
    broker.terminate();
}
