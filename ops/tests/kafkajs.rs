//! kafkajs 2 (a client of its own protocol implementation, not librdkafka) against the broker:
//! admin, idempotent produce, consumer group, committed offsets. The test installs kafkajs
//! with npm into `target/test-node` once.

mod support;

use support::*;

#[test]
fn kafkajs_produces_consumes_in_a_group_and_commits() {
    let broker = Broker::start(2);
    kafkajs_smoke(&broker.bootstrap());
}
