//! confluent-kafka 2.16 and kafka-python 3 against `ringlog serve` (issue #4). The Python
//! scripts in `tests/clients/` do the work and check; these tests start the broker, run them
//! with a time limit and show their output on failure.
//!
//! `RINGLOG_E2E_MESSAGES` overrides the message count (default 100,000 per client).

mod support;

use std::time::Duration;
use support::*;

fn messages() -> String {
    std::env::var("RINGLOG_E2E_MESSAGES").unwrap_or_else(|_| "100000".into())
}

fn run_suite(script: &str, cores: usize) {
    let mut broker = Broker::start(cores);
    let n = messages();
    let out = run_python(
        script,
        &[&broker.bootstrap(), &n],
        &[],
        Duration::from_secs(240),
    );
    let summary = out.lines().last().unwrap_or("");
    assert!(
        summary.contains("\"ok\": true"),
        "{script}: no success summary in output:\n{out}"
    );
    eprintln!("{script}: {summary}");
    broker.assert_alive();
    broker.terminate();
}

#[test]
fn confluent_kafka_suite() {
    run_suite("confluent_suite.py", 1);
}

#[test]
fn kafka_python_suite() {
    run_suite("kafka_python_suite.py", 1);
}
