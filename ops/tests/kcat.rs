//! kcat 1.7.1 (librdkafka 2.0.2) against `ringlog serve` (issue #4): metadata listing, keyed
//! produce with Kafka's murmur2 partitioner over every compression codec, and a full
//! consume-to-end that must return every value byte-identical, in order per partition (the
//! latter two in `support/kcat_suite.rs`, shared with the cluster tests).

mod support;

use std::process::Command;
use std::time::Duration;
use support::*;

const PARTITIONS: u32 = kcat_suite::PARTITIONS;

fn kcat_cmd(broker: &Broker) -> Command {
    let mut c = Command::new(kcat());
    c.arg("-b").arg(broker.bootstrap());
    c
}

#[test]
fn murmur2_matches_kafka_vectors() {
    // Vectors from Kafka's UtilsTest.testMurmur2.
    assert_eq!(murmur2(b"21"), -973932308);
    assert_eq!(murmur2(b"foobar"), -790332482);
    assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
    assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
    assert_eq!(
        murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
        -58897971
    );
    assert_eq!(murmur2(b"abc"), 479470107);
}

#[test]
fn kcat_metadata_lists_broker_and_topic() {
    let broker = Broker::start(1);
    create_topic(&broker, "kcat-meta", PARTITIONS, &[]);
    let out = run_ok(
        {
            let mut c = kcat_cmd(&broker);
            c.arg("-L");
            c
        },
        None,
        Duration::from_secs(30),
    );
    assert!(
        out.contains(&format!("broker 1 at {}", broker.bootstrap())),
        "kcat -L does not list `broker 1 at {}`:\n{out}",
        broker.bootstrap()
    );
    assert!(
        out.contains(&format!("topic \"kcat-meta\" with {PARTITIONS} partitions")),
        "kcat -L does not list the topic with {PARTITIONS} partitions:\n{out}"
    );
    for p in 0..PARTITIONS {
        assert!(
            out.contains(&format!("partition {p}, leader 1,")),
            "kcat -L: partition {p} without leader 1:\n{out}"
        );
    }
    // Topic-filtered listing too (Metadata with a topic list).
    let out = run_ok(
        {
            let mut c = kcat_cmd(&broker);
            c.args(["-L", "-t", "kcat-meta"]);
            c
        },
        None,
        Duration::from_secs(30),
    );
    assert!(out.contains("topic \"kcat-meta\""), "kcat -L -t:\n{out}");
}

#[test]
fn kcat_keyed_produce_and_consume_all_codecs() {
    let broker = Broker::start(1);
    create_topic(&broker, kcat_suite::TOPIC, kcat_suite::PARTITIONS, &[]);
    kcat_suite::run(&broker.bootstrap());
    broker_clean_shutdown(broker);
}

fn broker_clean_shutdown(mut broker: Broker) {
    broker.terminate();
}
